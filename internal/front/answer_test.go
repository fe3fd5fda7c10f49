package front

import "testing"

// An answer is kept whole up to the limit, and dropped whole past it:
// later writes never bring back a part of it.
func TestAnswerBufferKeepsWholeAnswersOnly(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limit  int64
		writes []string
		want   string
		over   bool
	}{
		{"under the limit", 10, []string{"abc", "def"}, "abcdef", false},
		{"exactly the limit", 6, []string{"abc", "def"}, "abcdef", false},
		{"one byte over", 5, []string{"abc", "def"}, "", true},
		{"over, then small writes", 5, []string{"abcdef", "g", "h"}, "", true},
		{"nothing written", 5, nil, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := AnswerBuffer{Limit: tc.limit}
			for _, w := range tc.writes {
				a.Write([]byte(w))
			}
			if string(a.Bytes()) != tc.want || a.Over() != tc.over {
				t.Errorf("kept %q over=%v, want %q over=%v", a.Bytes(), a.Over(), tc.want, tc.over)
			}
		})
	}
}
