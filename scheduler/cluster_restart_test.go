package scheduler

import "testing"

func TestRestartForgetsEverythingAndTellsClients(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"))
	s.handle(&AddClient{Client: "c2"})
	s.submit("c1", []GraphTask{task("a"), task("b", "a")}, "b")
	s.submit("c2", []GraphTask{task("x")})
	s.finish("w1", "a")
	out := s.handle(&Restart{})
	eq(t, s.NumTasks(), 0, "tasks after restart")
	for _, c := range []string{"c1", "c2"} {
		if len(msgsOp(out.Clients.Of(c), "restart")) != 1 {
			t.Errorf("client %s got %v, want one restart", c, out.Clients.Of(c))
		}
	}
	freed := 0
	for _, p := range out.Workers {
		freed += len(msgsOp(p.Msgs, "free-keys"))
	}
	if freed == 0 {
		t.Fatalf("no free-keys sent to workers holding or running tasks: %v", out.Workers)
	}
	// The cluster keeps working after a restart.
	s.submit("c1", []GraphTask{task("after")})
	s.wantStatus("after", "processing")
}
