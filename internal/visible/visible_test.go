package visible

import "testing"

func TestEscape(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"gpt-4o", "gpt-4o"},
		{"équipe 日本", "équipe 日本"},
		{"chat\u200b", `chat\u200b`},
		{"m\u2028z\u2029", `m\u2028z\u2029`},
		{"soft\u00adhyphen\ufeff", `soft\u00adhyphen\ufeff`},
		{"tag\U000e0001", `tag\U000e0001`},
		{"a\x00b\x1b[31mred\r\nX: 1", `a\x00b\x1b[31mred\x0d\x0aX: 1`},
		{"\xff\xfe\xc3", `\xff\xfe\xc3`},
		{"ab\u202egnp.exe", `ab\u202egnp.exe`},
		{"c1\u009bx", `c1\u009bx`},
		{`already \x1b escaped`, `already \x1b escaped`},
	} {
		if got := Escape(tt.in); got != tt.want {
			t.Errorf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
