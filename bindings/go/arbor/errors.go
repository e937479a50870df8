package arbor

import "strconv"

// kind is the type of the sentinel errors: each names one ArborCode.
type kind string

func (k kind) Error() string { return "arbor: " + string(k) }

// The sentinel errors. Every error of this package matches exactly one of them with
// errors.Is (a failed proof also matches ErrInvalidProof; an interrupted call also
// matches the context's error).
var (
	// ErrInvalidArgument: an argument is malformed or out of range (a nil or too long
	// key, a too long value, an empty path, a bad TOML configuration, a proof that does
	// not verify, …). Go checks what it can before calling Rust; Rust checks again.
	ErrInvalidArgument error = kind("invalid argument")
	// ErrCorrupt: the database or a checkpoint is damaged, or the directory holds
	// something that is not an Arbor database.
	ErrCorrupt error = kind("corrupt")
	// ErrIO: an I/O or storage error (including a directory locked by another open).
	ErrIO error = kind("I/O error")
	// ErrClosed: the DB is closed (or closing), or its handle is stale.
	ErrClosed error = kind("closed")
	// ErrCancelled: the operation was cancelled through its context.
	ErrCancelled error = kind("cancelled")
	// ErrPanic: Arbor panicked. The process is intact; the DB may be unusable (close it).
	ErrPanic error = kind("panic")
	// ErrInvalidProof: VerifyProof was given a proof that does not verify against the
	// root. Such an error matches ErrInvalidArgument too.
	ErrInvalidProof error = kind("invalid proof")
	// ErrOutsideWindow: GetAt, ProveAt or an account read's …At form (GetAccountAt,
	// GetStorageAt, GetProofAt) was given a block above the head or below the
	// recent window (head - history.recent_blocks, 128 by default; the message names the
	// window), or the block was reverted while it was read.
	ErrOutsideWindow error = kind("outside the readable window")

	// errNotFound is ARBOR_CODE_NOT_FOUND, which Get and VerifyProof turn into (nil,
	// nil); no exported function returns it.
	errNotFound error = kind("not found")
)

// Error is the error type of this package: the operation, the message (from Rust, or
// from Go's own checks) and the sentinel errors it matches.
type Error struct {
	// Op is the operation: "open", "get", "get at", "commit", "root", "prove",
	// "prove at", "verify proof", "commit accounts", "get account", "get account at",
	// "get storage", "get storage at", "get code", "get proof", "get proof at",
	// "create checkpoint", "restore", "close".
	Op string
	// Kind is the sentinel the error matches: ErrInvalidArgument, ErrCorrupt, ErrIO,
	// ErrClosed, ErrCancelled, ErrPanic or ErrOutsideWindow.
	Kind error
	// Message says what went wrong.
	Message string

	// also holds further errors the error matches (ErrInvalidProof, a context's error).
	also []error
}

// Error returns "arbor: <op>: <message> (<kind>)".
func (e *Error) Error() string {
	s := "arbor: " + e.Op + ": " + e.Message
	if k, ok := e.Kind.(kind); ok {
		s += " (" + string(k) + ")"
	}
	return s
}

// Unwrap returns the sentinel and any further errors the error matches, for errors.Is.
func (e *Error) Unwrap() []error {
	return append([]error{e.Kind}, e.also...)
}

func kindOf(c code) error {
	switch c {
	case codeNotFound:
		return errNotFound
	case codeInvalidArgument:
		return ErrInvalidArgument
	case codeCorrupt:
		return ErrCorrupt
	case codeIO:
		return ErrIO
	case codeClosed:
		return ErrClosed
	case codeCancelled:
		return ErrCancelled
	case codePanic:
		return ErrPanic
	case codeOutsideWindow:
		return ErrOutsideWindow
	default:
		return ErrIO
	}
}

func newError(op string, c code, message string, also ...error) *Error {
	k := kindOf(c)
	if k == ErrIO && c != codeIO {
		message = message + " (unknown code " + strconv.Itoa(int(c)) + ")"
	}
	return &Error{Op: op, Kind: k, Message: message, also: also}
}

// invalid is an ErrInvalidArgument found by Go before calling Rust.
func invalid(op, message string) *Error {
	return &Error{Op: op, Kind: ErrInvalidArgument, Message: message}
}

// closedError is an ErrClosed found by Go before calling Rust.
func closedError(op string) *Error {
	return &Error{Op: op, Kind: ErrClosed, Message: "the database is closed"}
}
