package cluster

// DefaultMaxKeys is how many keys a node holds at most when
// Config.MaxKeys is zero: about 250 MB of counter tables at the 200–250
// bytes a key takes, far above the keys most nodes serve in two windows.
const DefaultMaxKeys = 1_000_000
