package track

import (
	"time"
	"unsafe"

	"github.com/tidwall/gjson"
)

// seeGemini counts one streamGenerateContent event: a token per thought or
// content part (a function call counts as content), candidates finished
// by their finishReason, and usageMetadata, final once every candidate
// seen has finished.
func (s *Stream) seeGemini(data []byte, now time.Time) {
	root := gjson.Parse(unsafe.String(unsafe.SliceData(data), len(data)))
	content := false
	root.Get("candidates").ForEach(func(_, c gjson.Result) bool {
		content = true
		index := c.Get("index").Int()
		c.Get("content.parts").ForEach(func(_, p gjson.Result) bool {
			switch {
			case p.Get("thought").Bool() && p.Get("text").String() != "":
				s.thinking(now)
			case p.Get("text").String() != "", p.Get("functionCall").Exists(), p.Get("inlineData").Exists():
				s.content(now)
			}
			return true
		})
		finished := c.Get("finishReason").String() != ""
		if s.choices == nil {
			s.choices = make(map[int64]bool, 1)
		}
		if len(s.choices) < maxChoices || s.choices[index] || !finished {
			s.choices[index] = !finished
		}
		return true
	})
	if u := root.Get("usageMetadata"); u.IsObject() {
		s.Usage = geminiUsage(u)
		s.Final = s.contentEnded()
	} else if content && !s.contentEnded() {
		s.Final = false
	}
}

// geminiUsage reads usageMetadata. Gemini leaves zero counts out: input
// is stated by promptTokenCount, output by a candidates or thoughts count
// or a total beside the prompt count.
func geminiUsage(u gjson.Result) Usage {
	if !u.IsObject() {
		return Usage{}
	}
	prompt, cand, thoughts, total := u.Get("promptTokenCount"), u.Get("candidatesTokenCount"), u.Get("thoughtsTokenCount"), u.Get("totalTokenCount")
	num := func(r gjson.Result) bool { return r.Type == gjson.Number }
	return Usage{
		Input: prompt.Int() + u.Get("toolUsePromptTokenCount").Int(), HasInput: num(prompt),
		Output: cand.Int() + thoughts.Int(), HasOutput: num(cand) || num(thoughts) || num(total) && num(prompt),
		CacheRead: u.Get("cachedContentTokenCount").Int(), Reasoning: thoughts.Int(),
		Known: prompt.Exists() || cand.Exists() || total.Exists(),
	}
}
