module github.com/vigilhq/vigil/tokenizer

go 1.26.8
