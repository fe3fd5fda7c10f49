package cache

import (
	"net/http"
)

// Recorder tees the answer a handler writes to its client into a bounded
// buffer, cut where the handler flushes (a stream's events leave in those
// groups), so that the entry replays as the client received it. An answer
// over the entry size bound stops being recorded and is not stored; the
// client's answer is never affected.
type Recorder struct {
	http.ResponseWriter
	limit  int64
	status int
	wrote  bool
	header http.Header
	buf    []byte
	cuts   []int // end offsets of the chunks flushed so far
	over   bool
	failed bool // a write to the client failed: it has less than buf
	noted  bool
	note   Note
}

// Note is what the relay knows about the answer once it has ended.
type Note struct {
	// Complete: the relay saw the whole answer reach the client (a unary
	// answer written, a stream ended by its protocol's terminal event
	// without a cut, timeout or error).
	Complete bool
	// CostNano is what the answer cost; Priced false when unknown.
	CostNano int64
	Priced   bool
	// Provider, ProviderModel and ServedModel served it.
	Provider, ProviderModel, ServedModel string
}

// NewRecorder wraps w, recording at most limit bytes.
func NewRecorder(w http.ResponseWriter, limit int64) *Recorder {
	return &Recorder{ResponseWriter: w, limit: limit}
}

// Note records the relay's account of the answer (the last call wins).
func (w *Recorder) Note(n Note) { w.noted, w.note = true, n }

func (w *Recorder) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
		w.header = KeepHeaders(w.Header())
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *Recorder) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if !w.over {
		if int64(len(w.buf)+len(b)) > w.limit {
			w.over, w.buf, w.cuts = true, nil, nil
		} else {
			w.buf = append(w.buf, b...)
		}
	}
	n, err := w.ResponseWriter.Write(b)
	if err != nil {
		w.failed = true
	}
	return n, err
}

// Flush ends the current chunk and flushes the client's connection.
func (w *Recorder) Flush() {
	if !w.over && len(w.buf) > 0 && (len(w.cuts) == 0 || w.cuts[len(w.cuts)-1] < len(w.buf)) {
		w.cuts = append(w.cuts, len(w.buf))
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Answered passes the server's early-count hook through.
func (w *Recorder) Answered() {
	if a, ok := w.ResponseWriter.(interface{ Answered() }); ok {
		a.Answered()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *Recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Status is the answer's status (0 before anything was written).
func (w *Recorder) Status() int { return w.status }

// entry is the recorded answer as an entry, or nil with the reason it
// must not be stored.
func (w *Recorder) entry(proto string, stream bool) (*Entry, string) {
	switch {
	case !w.wrote:
		return nil, "empty"
	case w.status != http.StatusOK:
		return nil, "status"
	case w.over:
		return nil, "too_large"
	case w.failed || !w.noted || !w.note.Complete:
		return nil, "incomplete"
	}
	var chunks [][]byte
	start := 0
	for _, end := range w.cuts {
		chunks = append(chunks, w.buf[start:end:end])
		start = end
	}
	if start < len(w.buf) {
		chunks = append(chunks, w.buf[start:])
	}
	if len(chunks) == 0 {
		return nil, "empty"
	}
	if !stream {
		chunks = [][]byte{w.buf} // a unary body is replayed in one write
	}
	if why := finished(proto, stream, chunks); why != "" {
		return nil, why
	}
	n := w.note
	return &Entry{Status: w.status, Header: w.header, Stream: stream, Chunks: chunks, CostNano: n.CostNano, Priced: n.Priced,
		Provider: n.Provider, ProviderModel: n.ProviderModel, ServedModel: n.ServedModel}, ""
}
