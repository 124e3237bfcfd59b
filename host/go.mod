module github.com/vigilhq/vigil/host

go 1.26.8
