package main

import "slices"

// suggest returns the candidate s most likely mistypes: the one fewest edits
// away (an edit inserts, deletes or replaces a character, or swaps two
// neighbours), if that is 1 for a word of up to 4 characters and at most 2
// for a longer one; else the only candidate s is a prefix of, if s has 2
// characters or more. Ties go to the first candidate in sorted order, so the
// answer does not depend on the order given.
func suggest(s string, candidates []string) (string, bool) {
	sorted := slices.Sorted(slices.Values(candidates))
	most := 1
	if len([]rune(s)) > 4 {
		most = 2
	}
	best, bestDist := "", most+1
	for _, c := range sorted {
		if c == s {
			continue
		}
		if d := editDistance(s, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	if best != "" {
		return best, true
	}
	var prefixed []string
	for _, c := range sorted {
		if len(s) >= 2 && len(c) > len(s) && c[:len(s)] == s {
			prefixed = append(prefixed, c)
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0], true
	}
	return "", false
}

// editDistance is the optimal string alignment distance between a and b,
// in runes: insertions, deletions, substitutions and transpositions of
// adjacent runes each cost 1.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// d[i][j] is the distance between ra[:i] and rb[:j]; three rows suffice.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
