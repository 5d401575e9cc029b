// Package agents runs a fleet of real `sluice agent` processes on loopback
// and checks that together they enforce one limit as the simulator says
// the same fleet does. It runs only when asked, with the number of agents:
//
//	go test ./chaos/agents -agents 16 -v
//	SLUICE_AGENTS=16 go test ./chaos/agents -v
//
// With -agents.latency (or SLUICE_AGENTS_LATENCY) it also delays every
// loopback packet by that much with tc netem, as between regions, and runs
// the simulator with the same latency. That needs root and the kernel's
// netem qdisc (sch_netem), and slows every program on the machine that
// talks over loopback while it runs:
//
//	go test ./chaos/agents -agents 16 -agents.latency 50ms -v
//
// cut-heal.sh beside it runs three agents through a cut made with iptables
// on loopback, a heal with no traffic after it, and a kill -9 and restart,
// and checks what every node then says the fleet has left (root):
//
//	sudo bash chaos/agents/cut-heal.sh
package agents
