// Package configfile reads the YAML config file of `sluice agent --config`:
// where a node listens, whom it joins, the settings it tunes and the rules
// it enforces (examples/sluice.yaml shows every field).
//
// Load and Parse return a Config, or errors that name the file, the line,
// the rule and the field at fault:
//
//	examples/bad.yaml:7: rule 2 "api": count must be ≥ 1, got 0
//
// Config.NodeRules and Config.NodeConfig turn a Config into what
// cluster.Start takes. The file format lives here rather than in package
// cluster so that a program that embeds a node does not link a YAML parser.
package configfile
