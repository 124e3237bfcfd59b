module github.com/vigilhq/vigil/tokenizer

go 1.26.8

require (
	github.com/dlclark/regexp2 v1.11.5
	golang.org/x/text v0.42.0
)
