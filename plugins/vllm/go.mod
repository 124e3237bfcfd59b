module github.com/vigilhq/vigil/plugins/vllm

go 1.26.8
