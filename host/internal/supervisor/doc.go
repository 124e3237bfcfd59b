// Package supervisor is vigil's lifecycle: it starts the engine adapter,
// waits for the engine, keeps the worker registered exactly while the engine
// serves, and drains and exits when the engine is lost or vigil is told to
// stop.
//
// States and transitions (next is the pure transition function; enter holds
// the effects):
//
//		            SERVING             NOT_READY
//		Starting ───────────▶ Serving ◀──────────▶ NotReady
//		    │                    │     SERVING         │
//		    │ LOST / stop        │ LOST / stop         │ LOST / stop
//		    ▼                    ▼                     ▼
//		    └──────────────▶ Draining ◀────────────────┘
//		                         │ drained
//		                         ▼
//		                      Stopped
//
//	  - Starting: nothing is registered; the adapter waits for the engine.
//	  - Serving: the worker is registered and admits requests.
//	  - NotReady: the engine is alive but not accepting work; the worker is
//	    withdrawn and vigil stays up.
//	  - Draining: the worker is withdrawn at once and admits nothing; requests
//	    in flight get the grace period; then the adapter is shut down.
//	  - Stopped: Run returns.
//
// Whichever comes first, engine loss or a stop signal, decides the exit
// code: 1 for loss, 0 for a signal. A loss seen while draining for a signal
// is expected and logged at info.
package supervisor
