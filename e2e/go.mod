module github.com/vigilhq/vigil/e2e

go 1.26.8
