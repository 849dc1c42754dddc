package schemagen

import (
	"math/rand/v2"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode"
)

// matching returns a string the pattern matches, walking the parsed regular
// expression: Go's regexp is also what the API server checks patterns with.
// maxRepeat bounds every open repetition (*, +, {n,}).
func matching(r *rand.Rand, re *syntax.Regexp, maxRepeat int) string {
	var b strings.Builder
	walk(r, re, maxRepeat, &b)
	return b.String()
}

func walk(r *rand.Rand, re *syntax.Regexp, maxRepeat int, b *strings.Builder) {
	switch re.Op {
	case syntax.OpLiteral:
		for _, c := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 && r.IntN(2) == 0 {
				c = unicode.SimpleFold(c)
			}
			b.WriteRune(c)
		}
	case syntax.OpCharClass:
		b.WriteRune(pickRune(r, re.Rune))
	case syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		b.WriteRune(rune(' ' + r.IntN('~'-' '+1)))
	case syntax.OpCapture:
		walk(r, re.Sub[0], maxRepeat, b)
	case syntax.OpConcat:
		for _, s := range re.Sub {
			walk(r, s, maxRepeat, b)
		}
	case syntax.OpAlternate:
		walk(r, re.Sub[r.IntN(len(re.Sub))], maxRepeat, b)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		lo, hi := 0, maxRepeat
		switch re.Op {
		case syntax.OpPlus:
			lo = 1
		case syntax.OpQuest:
			hi = 1
		case syntax.OpRepeat:
			lo = re.Min
			if re.Max >= 0 {
				hi = re.Max
			} else {
				hi = lo + maxRepeat
			}
		}
		if hi < lo {
			hi = lo
		}
		n := lo + r.IntN(hi-lo+1)
		for range n {
			walk(r, re.Sub[0], maxRepeat, b)
		}
	default:
		// Anchors, word boundaries and empty matches add no characters.
	}
}

// pickRune picks from a class given as [lo, hi] pairs, mostly among the
// printable ASCII it holds.
func pickRune(r *rand.Rand, ranges []rune) rune {
	if len(ranges) == 0 {
		return 'x'
	}
	var ascii [][2]rune
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], min(ranges[i+1], '~')
		if lo < ' ' {
			lo = ' '
		}
		if lo <= hi {
			ascii = append(ascii, [2]rune{lo, hi})
		}
	}
	if len(ascii) > 0 && r.IntN(20) != 0 {
		p := ascii[r.IntN(len(ascii))]
		return p[0] + rune(r.IntN(int(p[1]-p[0]+1)))
	}
	i := 2 * r.IntN(len(ranges)/2)
	lo, hi := ranges[i], min(ranges[i+1], unicode.MaxRune)
	return lo + rune(r.Int64N(int64(hi-lo)+1))
}

// compiled keeps each pattern parsed once.
type compiled struct {
	re     *regexp.Regexp
	syntax *syntax.Regexp
}

func compile(pattern string) (*compiled, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	s, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, err
	}
	return &compiled{re: re, syntax: s.Simplify()}, nil
}
