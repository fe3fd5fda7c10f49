package inference

import (
	"net/http"
	"time"

	"switchboard/internal/front"
	"switchboard/internal/snapshot"
	"switchboard/internal/tenant"
)

// Models serves GET /v1/models: the models the caller may use, in
// Anthropic's shape for an Anthropic SDK.
func (s *Plane) Models(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot, id *tenant.Identity) {
	if wantsAnthropic(r) {
		data := make([]anthropicModel, 0, len(snap.Config.Models))
		for _, m := range snap.Config.Models {
			if !id.MayUse(m.Name) {
				continue
			}
			data = append(data, anthropicModel{Type: "model", ID: m.Name, DisplayName: m.Name, CreatedAt: snap.Loaded.UTC().Format(time.RFC3339)})
		}
		out := map[string]any{"data": data, "has_more": false, "first_id": nil, "last_id": nil}
		if len(data) > 0 {
			out["first_id"], out["last_id"] = data[0].ID, data[len(data)-1].ID
		}
		front.WriteJSON(w, http.StatusOK, out)
		return
	}
	data := make([]modelObject, 0, len(snap.Config.Models))
	for _, m := range snap.Config.Models {
		if !id.MayUse(m.Name) {
			continue // a key limited to some models sees only those
		}
		data = append(data, modelObject{ID: m.Name, Object: "model", Created: snap.Loaded.Unix(), OwnedBy: "switchboard", ContextLength: m.ContextLength})
	}
	front.WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// Model serves GET /v1/models/{name}; an admin also sees its providers,
// routing policy and fallbacks.
func (s *Plane) Model(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot, id *tenant.Identity) {
	name := r.PathValue("name")
	rt := snap.Routes.Lookup(name)
	if rt == nil || !id.MayUse(rt.Model.Name) {
		proto := front.OpenAI
		if wantsAnthropic(r) {
			proto = front.Anthropic
		}
		front.WriteError(w, proto, modelNotFound(name))
		return
	}
	if wantsAnthropic(r) {
		front.WriteJSON(w, http.StatusOK, anthropicModel{Type: "model", ID: name, DisplayName: name, CreatedAt: snap.Loaded.UTC().Format(time.RFC3339)})
		return
	}
	mo := modelObject{ID: name, Object: "model", Created: snap.Loaded.Unix(), OwnedBy: "switchboard", ContextLength: rt.Model.ContextLength}
	if !tenant.Operator(id) {
		front.WriteJSON(w, http.StatusOK, mo) // providers are the operator's business
		return
	}
	for i, c := range rt.Candidates {
		mo.Providers = append(mo.Providers, modelProvider{Provider: c.Provider, Model: c.Model, Type: c.Type, Primary: i == rt.Primary})
	}
	mo.Routing, mo.Fallbacks = rt.Policy, modelsOf(rt.Model.Fallbacks)
	front.WriteJSON(w, http.StatusOK, mo)
}

type modelObject struct {
	ID            string          `json:"id"`
	Object        string          `json:"object"`
	Created       int64           `json:"created"`
	OwnedBy       string          `json:"owned_by"`
	ContextLength int             `json:"context_length,omitempty"`
	Providers     []modelProvider `json:"providers,omitempty"`
	// Routing and Fallbacks (admins): the model's policy and the models
	// it falls back to.
	Routing   string   `json:"routing,omitempty"`
	Fallbacks []string `json:"fallbacks,omitempty"`
}

type modelProvider struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Type     string `json:"type"`
	Primary  bool   `json:"primary"`
}

// anthropicModel is a model in Anthropic's Models API shape, for Anthropic
// SDK clients (they send anthropic-version).
type anthropicModel struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

func wantsAnthropic(r *http.Request) bool { return r.Header.Get("Anthropic-Version") != "" }
