module github.com/vigilhq/vigil/e2e

go 1.26.8

require (
	github.com/hashicorp/consul/api v1.34.5
	github.com/hashicorp/go-plugin v1.8.0
	github.com/vigilhq/vigil/sdk v0.0.0
	github.com/vigilhq/vigil/tokenizer v0.0.0
	go.uber.org/goleak v1.3.0
	google.golang.org/grpc v1.85.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/cpuguy83/go-md2man/v2 v2.0.7 // indirect
	github.com/dlclark/regexp2 v1.11.5 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/hashicorp/yamux v0.1.2 // indirect
	github.com/oklog/run v1.1.0 // indirect
	github.com/russross/blackfriday/v2 v2.1.0 // indirect
	github.com/urfave/cli/v2 v2.27.7 // indirect
	github.com/xrash/smetrics v0.0.0-20240521201337-686a1a2994c1 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

require (
	github.com/armon/go-metrics v0.4.1 // indirect
	github.com/fatih/color v1.19.0 // indirect
	github.com/go-viper/mapstructure/v2 v2.5.0 // indirect
	github.com/hashicorp/errwrap v1.1.0 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/hashicorp/go-hclog v1.6.3 // indirect
	github.com/hashicorp/go-immutable-radix v1.3.1 // indirect
	github.com/hashicorp/go-metrics v0.6.0 // indirect
	github.com/hashicorp/go-multierror v1.1.1 // indirect
	github.com/hashicorp/go-rootcerts v1.0.2 // indirect
	github.com/hashicorp/golang-lru v1.0.2 // indirect
	github.com/hashicorp/serf v0.10.4 // indirect
	github.com/mattn/go-colorable v0.1.15 // indirect
	github.com/mattn/go-isatty v0.0.22 // indirect
	github.com/mitchellh/go-homedir v1.1.0 // indirect
	github.com/vigilhq/vigil/plugins/sglang v0.0.0
	github.com/vigilhq/vigil/plugins/vllm v0.0.0
	github.com/vigilhq/vigil/proto v0.0.0
	golang.org/x/exp v0.0.0-20260218203240-3dfff04db8fa // indirect
	golang.org/x/sys v0.48.0
)

replace github.com/vigilhq/vigil/proto => ../proto

replace github.com/vigilhq/vigil/plugins/vllm => ../plugins/vllm

replace github.com/vigilhq/vigil/sdk => ../sdk

replace github.com/vigilhq/vigil/tokenizer => ../tokenizer

replace github.com/vigilhq/vigil/plugins/sglang => ../plugins/sglang
