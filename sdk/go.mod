module github.com/vigilhq/vigil/sdk

go 1.26.8
