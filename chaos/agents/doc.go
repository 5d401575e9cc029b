// Package agents runs a fleet of real `sluice agent` processes on loopback
// and checks that together they enforce one limit as the simulator says
// the same fleet does. It runs only when asked, with the number of agents:
//
//	go test ./chaos/agents -agents 16 -v
//	SLUICE_AGENTS=16 go test ./chaos/agents -v
package agents
