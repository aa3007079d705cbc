package server

import (
	"context"

	"daskgo/comm"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// getStory is Scheduler.get_story, behind Client.story(*keys_or_stimuli):
// the transitions of the named keys or stimulus ids, as distributed's
// Transition tuples (key, start, finish, recommendations, stimulus_id,
// timestamp) with a seventh element of ours: where the transition placed
// the task and why ({"worker": ..., "reason": ...}, None when it placed
// nothing). The log keeps no recommendations: that element is {}.
func (s *Server) getStory(ctx context.Context, req *comm.Request) (any, error) {
	var keys []protocol.Key
	var stimuli []string
	items, _ := req.Args.Get("keys_or_stimuli").([]any)
	if set, ok := req.Args.Get("keys_or_stimuli").(protocol.Set); ok {
		items = set
	}
	for _, v := range items {
		if str, ok := v.(string); ok {
			stimuli = append(stimuli, str)
		}
		if k, err := protocol.KeyOf(v); err == nil {
			keys = append(keys, k)
		}
	}
	var story []scheduler.Transition
	if err := s.loop.query(ctx, func(st *scheduler.State) { story = st.StoryOf(keys, stimuli) }); err != nil {
		return nil, err
	}
	out := make([]any, len(story))
	for i, t := range story {
		var placed any
		if t.Worker != "" || t.Reason.Rule != scheduler.RuleNone {
			placed = protocol.NewMap("worker", nilIfEmpty(t.Worker), "rule", t.Reason.Rule.Name(),
				"reason", t.Reason.String())
		}
		out[i] = []any{t.Key.Value(), t.From.String(), t.To.String(), protocol.NewMap(), t.StimulusID,
			float64(t.At.UnixNano()) / 1e9, placed}
	}
	return out, nil
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
