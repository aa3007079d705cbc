// Package comm is the transport layer between the Go scheduler and stock
// dask.distributed peers: sockets, the handshake, request/reply RPCs,
// batched streams and a connection pool. It mirrors distributed/comm/
// (core.py, tcp.py), distributed/core.py (Server._handle_comm, send_recv,
// error_message, ConnectionPool) and distributed/batched.py.
//
// Data flow:
//
//	Listener.Accept ─► *Conn ─► Server.serveConn ─┬─ handshake (deadline)
//	                                              ├─ loop: read request dict, pop op/reply/close/serializers,
//	                                              │        Handler(ctx, req) ─► exactly one reply (unless reply=false)
//	                                              └─ req.TakeOver(): the handler owns the stream until it returns
//	Dial ─► *Conn (handshaken) ─► Conn.Call / Pool.Call / Pool.Do / BatchedSend
//
// Invariants:
//   - Every *Conn has finished the symmetric handshake (comm/core.py: connect,
//     Listener.on_connection) before any message is read or written on it.
//   - A read never allocates more than the bytes that arrived or the
//     configured protocol.Limits, whichever is smaller (protocol.ReadFrames).
//   - A failed or partial write closes the connection: the peer could not
//     resynchronise on a half-written frame.
//   - Bad peer input closes only that peer's connection, with a log line naming
//     the peer, and an error reply whenever the request was readable and a
//     reply was expected. Nothing a peer sends can panic the server.
//   - Every goroutine started here has an owner and an exit: per-connection
//     goroutines belong to the Server (Shutdown waits for them), BatchedSend's
//     writer belongs to the BatchedSend (Close/Abort stop it).
//   - Every connection has a heartbeat (TCP keepalive plus TCP_USER_TIMEOUT on
//     Linux, like distributed's set_tcp_timeout) and a deadline (handshake
//     timeout, idle timeout between RPC requests).
package comm
