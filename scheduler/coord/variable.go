package coord

import (
	"strconv"

	"daskgo/protocol"
)

// Variables: distributed/variable.py VariableExtension. A variable holds
// either opaque data (returned exactly as the client sent it) or a future's
// key, which the pseudo-client "variable-<name>" desires so the result
// outlives the client that set it. A getter receives the key with a token;
// its client confirms on its stream (variable-future-received-confirm) once
// it holds the future itself, and only then may a replaced or deleted
// variable release the key.

// VariableSet is variable_set. With Future, Key names the future;
// otherwise Data is the value, opaque.
type VariableSet struct {
	Call
	Name   string
	Future bool
	Key    protocol.Key
	Data   any
}

// VariableGet is variable_get; the answer is the variable's record.
type VariableGet struct {
	Call
	Name string
	// NoWait: timeout 0, fail at once when the variable is unset.
	NoWait bool
}

// VariableDelete is the variable_delete stream op.
type VariableDelete struct {
	Name string
}

// VariableFutureReceived is variable-future-received-confirm from Client's
// stream: Client now desires Key itself.
type VariableFutureReceived struct {
	Client string
	Name   string
	Key    protocol.Key
	Token  string
}

type variable struct {
	future bool
	key    protocol.Key
	data   any
}

// varHandout is VariableExtension.waiting's key: a future of a variable.
type varHandout struct {
	key  protocol.Key
	name string
}

type variableExt struct {
	vars    map[string]*variable
	getters map[string][]int64 // variable -> parked gets, oldest first
	// waiting: tokens handed out and not yet confirmed
	waiting map[varHandout]map[string]bool
	// releases: keys to release once their tokens are confirmed;
	// true also removes the pseudo-client (variable_delete)
	releases map[varHandout]bool
	tokens   int64
}

func (v *variableExt) init() {
	if v.vars == nil {
		v.vars = map[string]*variable{}
		v.getters = map[string][]int64{}
		v.waiting = map[varHandout]map[string]bool{}
		v.releases = map[varHandout]bool{}
	}
}

func variableClient(name string) string { return "variable-" + name }

func (c *Coordinator) dispatchVariable(op Op) bool {
	switch x := op.(type) {
	case *VariableSet:
		c.variableSet(x)
	case *VariableGet:
		c.variableGet(x)
	case *VariableDelete:
		c.variableDelete(x.Name)
	case *VariableFutureReceived:
		c.variableFutureReceived(x)
	default:
		return false
	}
	return true
}

// variableSet mirrors VariableExtension.set.
func (c *Coordinator) variableSet(x *VariableSet) {
	v := &c.vars
	v.init()
	rec := &variable{future: x.Future, key: x.Key, data: x.Data}
	if x.Future && !c.holdFuture(x.Key, variableClient(x.Name), x.ReplyTo) {
		return
	}
	if old := v.vars[x.Name]; old != nil && old.future && (!x.Future || old.key != x.Key) {
		c.variableRelease(old.key, x.Name, false)
	}
	v.vars[x.Name] = rec
	getters := v.getters[x.Name]
	delete(v.getters, x.Name)
	for _, id := range getters {
		c.answer(id, c.variableRecord(x.Name, rec))
	}
}

// variableGet mirrors VariableExtension.get: wait until the variable is set.
func (c *Coordinator) variableGet(x *VariableGet) {
	v := &c.vars
	v.init()
	if rec := v.vars[x.Name]; rec != nil {
		c.host.Reply(x.ReplyTo, c.variableRecord(x.Name, rec))
		return
	}
	if x.NoWait || x.ReplyTo == 0 {
		c.host.Reply(x.ReplyTo, builtinError("TimeoutError", "variable %s is not set", x.Name))
		return
	}
	id, name := x.ReplyTo, x.Name
	v.getters[name] = append(v.getters[name], id)
	c.park(id, func(why WaitEnd) {
		v.getters[name] = removeID(v.getters[name], id)
		if len(v.getters[name]) == 0 {
			delete(v.getters, name)
		}
		c.timeoutAnswer(id, why, builtinError("TimeoutError", "variable %s was not set in time", name))
	})
}

// variableRecord is the answer of a get: {"type": "msgpack", "value": data}
// or the future's record with a fresh token and the task's state.
func (c *Coordinator) variableRecord(name string, rec *variable) *protocol.Map {
	if !rec.future {
		return protocol.NewMap("type", "msgpack", "value", rec.data)
	}
	v := &c.vars
	v.tokens++
	token := "variable-token-" + strconv.FormatInt(v.tokens, 10)
	h := varHandout{key: rec.key, name: name}
	if v.waiting[h] == nil {
		v.waiting[h] = map[string]bool{}
	}
	v.waiting[h][token] = true
	m := protocol.NewMap("type", "Future", "value", rec.key, "token", token)
	c.addFutureState(m, rec.key)
	return m
}

// holdFuture makes the pseudo-client desire a future's key; false (and a
// TimeoutError answered) if the key is unknown, as the extensions raise
// once their wait for the key runs out.
func (c *Coordinator) holdFuture(key protocol.Key, client string, replyTo int64) bool {
	if _, known := c.host.FutureState(key); !known {
		c.host.Reply(replyTo, builtinError("TimeoutError", "Task %s unknown to scheduler.", key))
		return false
	}
	c.host.DesireKeys([]protocol.Key{key}, client)
	return true
}

// addFutureState adds "state" (and the exception of an erred task) to a
// future's record, as VariableExtension.get and QueueExtension.get do.
func (c *Coordinator) addFutureState(m *protocol.Map, key protocol.Key) {
	fs, known := c.host.FutureState(key)
	if !known {
		m.Set("state", "lost")
		return
	}
	m.Set("state", fs.State)
	if fs.Erred {
		m.Set("exception", fs.Exception)
		m.Set("traceback", fs.Traceback)
	}
}

// variableFutureReceived mirrors VariableExtension.future_received_confirm.
func (c *Coordinator) variableFutureReceived(x *VariableFutureReceived) {
	v := &c.vars
	v.init()
	c.host.DesireKeys([]protocol.Key{x.Key}, x.Client)
	h := varHandout{key: x.Key, name: x.Name}
	if !v.waiting[h][x.Token] {
		c.host.Logf(LogWarn, x.Key, "", x.Client, "variable %s: unknown token %s confirmed", x.Name, x.Token)
		return
	}
	delete(v.waiting[h], x.Token)
	if len(v.waiting[h]) == 0 {
		delete(v.waiting, h)
		if rm, ok := v.releases[h]; ok {
			delete(v.releases, h)
			c.variableRelease(x.Key, x.Name, rm)
		}
	}
}

// variableRelease mirrors VariableExtension.release: the variable's
// pseudo-client lets go of key once every handed-out token is confirmed.
func (c *Coordinator) variableRelease(key protocol.Key, name string, removeClient bool) {
	v := &c.vars
	h := varHandout{key: key, name: name}
	if len(v.waiting[h]) > 0 {
		v.releases[h] = v.releases[h] || removeClient
		return
	}
	c.host.ReleaseKeys([]protocol.Key{key}, variableClient(name))
	if removeClient && v.vars[name] == nil {
		c.host.RemoveClient(variableClient(name))
	}
}

// variableDelete mirrors VariableExtension.delete.
func (c *Coordinator) variableDelete(name string) {
	v := &c.vars
	v.init()
	old := v.vars[name]
	delete(v.vars, name)
	if old != nil && old.future {
		c.variableRelease(old.key, name, true)
		return
	}
	c.host.RemoveClient(variableClient(name))
}

func removeID(ids []int64, id int64) []int64 {
	for i, x := range ids {
		if x == id {
			return append(ids[:i], ids[i+1:]...)
		}
	}
	return ids
}
