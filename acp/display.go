package acp

import (
	"strings"

	"github.com/octet-agent/octet/tools"
)

// How text reaches a person through an ACP client. Clients render a tool
// call's title and its text content as Markdown (Zed does), so text from
// the model, a repository or a tool would be interpreted there: an HTML
// comment hidden, a link shown as its label only, a backslash dropped. So
// text octet shows about a call is sent literal (a title as a Markdown
// code span, text content as a fenced code block), and text that
// describes what a call does (titles, approval previews, diffs) is
// rendered as the LSP dialect's approval prompt renders it
// (tools.ApprovalText: invisible and bidirectional characters made
// visible, nothing removed).

// maxTitleText bounds the untrusted text of one title (its whole is shown
// elsewhere: the call's content or rawInput).
const maxTitleText = 200

// titleText is untrusted text s made visible for a title: its first line,
// at most maxTitleText bytes, marked when cut (tools.ApprovalHeadline).
func titleText(s string) string {
	return tools.ApprovalHeadline(tools.ApprovalText(s), maxTitleText)
}

// codeSpan is one line of text s as a Markdown code span: a client that
// renders Markdown shows it exactly, one that does not shows it between
// backticks.
func codeSpan(s string) string {
	if s == "" {
		return ""
	}
	fence := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") || strings.HasPrefix(s, " ") || strings.HasSuffix(s, " ") {
		// CommonMark removes one space from each end of such a span.
		s = " " + s + " "
	}
	return fence + s + fence
}

// literalContent is text content showing s exactly: a fenced Markdown code
// block whose fence no line of s can close, info naming its language
// ("diff", "sh", "text").
func literalContent(info, s string) map[string]any { return textContent(fenced(info, s)) }

// fenced is s as a fenced Markdown code block no line of s can close.
func fenced(info, s string) string {
	fence := strings.Repeat("`", max(3, longestRun(s, '`')+1))
	return fence + info + "\n" + strings.TrimSuffix(s, "\n") + "\n" + fence
}

// longestRun is the length of the longest run of c in s.
func longestRun(s string, c byte) int {
	longest, n := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] != c {
			n = 0
			continue
		}
		n++
		longest = max(longest, n)
	}
	return longest
}
