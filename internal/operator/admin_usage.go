package operator

import (
	"context"
	"net/http"
	"time"

	"switchboard/internal/front"
	"switchboard/internal/snapshot"
	"switchboard/internal/tenant"
	"switchboard/internal/usagelog"
)

// exportTimeout bounds one export's query and writes: a slow reader
// cannot hold a read transaction open for ever.
const exportTimeout = 5 * time.Minute

// usageQuery validates the request's parameters as a query of kind; nil
// when it answered (400 invalid_value naming the parameter, or 404 when
// the usage log is off).
func (s *Plane) usageQuery(w http.ResponseWriter, r *http.Request, kind string) *usagelog.Query {
	if s.UsageLog() == nil {
		front.WriteError(w, front.OpenAI, &front.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "usage_log_disabled",
			Message: "the usage log is off on this gateway (usage_log.enabled: false)"})
		return nil
	}
	q, perr := usagelog.ParseQuery(kind, r.URL.Query())
	if perr != nil {
		// invalid_value, as everywhere in the admin API for a bad parameter.
		front.WriteError(w, front.OpenAI, &front.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_value",
			Param: perr.Param, Message: perr.Error()})
		return nil
	}
	return q
}

// UsageSummary serves GET /admin/v1/usage: sums of requests, tokens
// and cost, grouped by up to three of tenant, key, model, provider,
// status, day and hour, within from..to and the filters.
func (s *Plane) UsageSummary(w http.ResponseWriter, r *http.Request, _ *snapshot.Snapshot, _ *tenant.Identity) {
	q := s.usageQuery(w, r, usagelog.KindUsage)
	if q == nil {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	groups, total, err := s.UsageLog().DB().Summary(ctx, q)
	if err != nil {
		s.queryFailed(w, r, err)
		return
	}
	if q.Format != usagelog.FormatJSON {
		w.Header().Set("Content-Type", usagelog.ContentType(q.Format))
		_ = usagelog.WriteGroups(w, q.Format, q.GroupBy, groups)
		return
	}
	front.WriteJSON(w, http.StatusOK, usagelog.SummaryBody(q, groups, total))
}

// Requests serves GET /admin/v1/requests: rows newest first,
// filtered; JSON pages of at most usagelog.MaxPage with next_cursor, or a
// streamed CSV / JSON-lines export of at most usagelog.MaxExport rows.
func (s *Plane) Requests(w http.ResponseWriter, r *http.Request, _ *snapshot.Snapshot, _ *tenant.Identity) {
	q := s.usageQuery(w, r, usagelog.KindRequests)
	if q == nil {
		return
	}
	db := s.UsageLog().DB()
	if q.Format == usagelog.FormatJSON {
		ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
		defer cancel()
		rows, next, err := db.List(ctx, q.Filter, q.Cursor, q.Limit)
		if err != nil {
			s.queryFailed(w, r, err)
			return
		}
		front.WriteJSON(w, http.StatusOK, usagelog.PageBody(rows, next))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), exportTimeout)
	defer cancel()
	w.Header().Set("Content-Type", usagelog.ContentType(q.Format))
	w.Header().Set("Content-Disposition", `attachment; filename="requests.`+q.Format+`"`)
	rc := http.NewResponseController(w)
	out := usagelog.NewRowWriter(w, q.Format)
	n := 0
	err := db.EachFrom(ctx, q.Filter, q.Cursor, q.Limit, func(row usagelog.Row) error {
		if err := out.Write(row); err != nil {
			return err
		}
		if n++; n%1000 == 0 {
			// Each flush must reach the client in time: a reader that
			// stops reading ends the export instead of holding it.
			_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if err := out.Flush(); err != nil {
				return err
			}
			return rc.Flush()
		}
		return nil
	})
	if err != nil {
		// Headers are gone: the export ends short; the log says why.
		s.Log.WarnContext(r.Context(), "usage export ended early", "rows", n, "error", err.Error())
		return
	}
	_ = out.Close()
}
