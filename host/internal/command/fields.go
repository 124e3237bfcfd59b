package command

import (
	"errors"

	"github.com/vigilhq/vigil/sdk"
)

// fieldFlags names the flag of vigil run that sets each request field an
// adapter can reject (sdk.FieldError): the sdk names its own fields, and
// vigil's user is told which flag to change.
var fieldFlags = map[string]string{
	sdk.FieldEngineAddr:      "engine-addr",
	sdk.FieldStartupDeadline: "startup-deadline",
	sdk.FieldOptions:         "engine-option",
	sdk.FieldHealthInterval:  "health-interval",
	sdk.FieldHealthTimeout:   "health-timeout",
	sdk.FieldHealthFailures:  "health-failures",
	sdk.FieldHealthRetryMax:  "engine-retry-max",
	sdk.FieldHealthConfirm:   "health-confirm",
}

// flagError is an adapter's rejection as vigil run's user reads it: the
// flag in place of the sdk field, then what it accepts, as parseRun's own
// errors read.
type flagError struct {
	flag, problem string
	err           error // the adapter's, which keeps its class
}

func (e *flagError) Error() string { return "--" + e.flag + " " + e.problem }
func (e *flagError) Unwrap() error { return e.err }

// namingFlags returns err naming the flag when it is an sdk.FieldError for
// a field a flag sets, and err as it is otherwise.
func namingFlags(err error) error {
	var fe *sdk.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	flag, ok := fieldFlags[fe.Field]
	if !ok {
		return err
	}
	return &flagError{flag: flag, problem: fe.Problem, err: err}
}
