import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// A TCP proxy on loopback that damages connections at seeded random points: it refuses some
/// at once, cuts some in the middle of the request or of the response, and stalls some for a
/// while before passing their bytes on. The rest pass untouched. `faulty` turns it all off.
final class FaultProxy: Sendable {
    enum Fault: Sendable, Equatable {
        case none
        case refuse
        case cutRequest(after: Int)
        case cutResponse(after: Int)
        case stall(Duration)
    }

    struct Counts: Sendable {
        var connections = 0, refused = 0, cutRequests = 0, cutResponses = 0, stalls = 0
    }

    let port: Int
    private let channel: any Channel
    /// Bumped by `freezeOpenConnections`: a connection opened before stops passing bytes.
    let epoch = Mutex(0)
    private let decide: Mutex<(rng: UInt64, faulty: Bool, counts: Counts)>

    /// Starts a proxy to `127.0.0.1:target`; `seed` decides every fault.
    static func start(to target: Int, seed: UInt64) async throws -> FaultProxy {
        let state = Mutex<(rng: UInt64, faulty: Bool, counts: Counts)>((seed | 1, true, Counts()))
        let box = DecisionBox()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { inbound in
                let fault = box.next()
                return inbound.eventLoop.makeCompletedFuture {
                    if fault == .refuse {
                        inbound.close(promise: nil)
                        return
                    }
                    let frozen = box.frozenCheck()
                    try inbound.pipeline.syncOperations.addHandler(InboundHandler(target: target, fault: fault, frozen: frozen))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let proxy = FaultProxy(port: channel.localAddress?.port ?? 0, channel: channel, decide: state)
        box.proxy.withLock { $0 = proxy }
        return proxy
    }

    private init(port: Int, channel: any Channel, decide: consuming Mutex<(rng: UInt64, faulty: Bool, counts: Counts)>) {
        self.port = port
        self.channel = channel
        self.decide = decide
    }

    var faulty: Bool {
        get { decide.withLock { $0.faulty } }
        set { decide.withLock { $0.faulty = newValue } }
    }

    var counts: Counts { decide.withLock { $0.counts } }

    /// The next connection's fault (xorshift, so a seed replays the same sequence).
    fileprivate func nextFault() -> Fault {
        decide.withLock { s in
            s.counts.connections += 1
            guard s.faulty else { return .none }
            s.rng ^= s.rng << 13
            s.rng ^= s.rng >> 7
            s.rng ^= s.rng << 17
            let r = s.rng % 100
            // A connection is kept alive for many requests: a cut point anywhere in its first
            // 64 KiB lands in the middle of one of them.
            let k = Int((s.rng >> 8) % 65536)
            switch r {
            case 0 ..< 10: s.counts.refused += 1; return .refuse
            case 10 ..< 30: s.counts.cutRequests += 1; return .cutRequest(after: k)
            case 30 ..< 50: s.counts.cutResponses += 1; return .cutResponse(after: k)
            case 50 ..< 60: s.counts.stalls += 1; return .stall(.milliseconds(Int64(20 + (s.rng >> 20) % 300)))
            default: return .none
            }
        }
    }

    /// Makes every open connection go silent (nothing passes either way, nothing is closed), as
    /// a network that drops packets does; connections opened afterwards pass.
    func freezeOpenConnections() { epoch.withLock { $0 += 1 } }

    func stop() async {
        try? await channel.close()
    }
}

/// Lets the accept callback reach the proxy made after the bind.
private final class DecisionBox: Sendable {
    let proxy = Mutex<FaultProxy?>(nil)
    func next() -> FaultProxy.Fault { proxy.withLock { $0 }?.nextFault() ?? .none }

    /// Whether a connection opened now has been frozen since.
    func frozenCheck() -> @Sendable () -> Bool {
        guard let proxy = proxy.withLock({ $0 }) else { return { false } }
        let opened = proxy.epoch.withLock { $0 }
        return { proxy.epoch.withLock { $0 } != opened }
    }
}

/// The client's side: connects to the target, then forwards bytes both ways with the fault.
private final class InboundHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let target: Int
    let fault: FaultProxy.Fault
    let frozen: @Sendable () -> Bool
    var outbound: (any Channel)?
    var pending: [ByteBuffer] = []
    var sent = 0
    var closed = false

    init(target: Int, fault: FaultProxy.Fault, frozen: @escaping @Sendable () -> Bool) {
        self.target = target
        self.fault = fault
        self.frozen = frozen
    }

    func channelActive(context: ChannelHandlerContext) {
        let inbound = context.channel
        let loop = context.eventLoop
        ClientBootstrap(group: loop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { out in
                out.eventLoop.makeCompletedFuture {
                    try out.pipeline.syncOperations.addHandler(OutboundHandler(inbound: inbound, fault: self.fault, frozen: self.frozen))
                }
            }
            .connect(host: "127.0.0.1", port: target)
            .whenComplete { result in
                loop.execute {
                    switch result {
                    case .success(let out):
                        self.outbound = out
                        out.closeFuture.whenComplete { _ in inbound.close(promise: nil) }
                        for b in self.pending { self.forward(b) }
                        self.pending = []
                    case .failure:
                        inbound.close(promise: nil)
                    }
                }
            }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        if outbound == nil { pending.append(buffer); return }
        forward(buffer)
    }

    private func forward(_ buffer: ByteBuffer) {
        guard let outbound, !closed, !frozen() else { return }
        var buffer = buffer
        if case .cutRequest(let after) = fault, sent + buffer.readableBytes > after {
            if let slice = buffer.readSlice(length: max(0, after - sent)) { outbound.writeAndFlush(slice, promise: nil) }
            closed = true
            outbound.close(promise: nil)
            return
        }
        sent += buffer.readableBytes
        if case .stall(let d) = fault {
            let ms = Int64(d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000)
            let held = buffer
            outbound.eventLoop.scheduleTask(in: .milliseconds(ms)) { outbound.writeAndFlush(held, promise: nil) }
        } else {
            outbound.writeAndFlush(buffer, promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        outbound?.close(promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// The server's side: forwards the answer back to the client, cutting it when told.
private final class OutboundHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    let inbound: any Channel
    let fault: FaultProxy.Fault
    let frozen: @Sendable () -> Bool
    var received = 0
    var closed = false

    init(inbound: any Channel, fault: FaultProxy.Fault, frozen: @escaping @Sendable () -> Bool) {
        self.inbound = inbound
        self.fault = fault
        self.frozen = frozen
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closed, !frozen() else { return }
        var buffer = unwrapInboundIn(data)
        if case .cutResponse(let after) = fault, received + buffer.readableBytes > after {
            if let slice = buffer.readSlice(length: max(0, after - received)) { inbound.writeAndFlush(slice, promise: nil) }
            closed = true
            inbound.close(promise: nil)
            context.close(promise: nil)
            return
        }
        received += buffer.readableBytes
        inbound.writeAndFlush(buffer, promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        inbound.close(promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
