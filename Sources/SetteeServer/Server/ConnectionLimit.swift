import Foundation
import HummingbirdCore
import Logging
import NIOCore
import Synchronization

/// How many connections one listener holds open, against its limit (`maxIncomingConnections`).
///
/// Thread-safe: an atomic counter.
final class ConnectionLimiter: Sendable {
    /// 0: no limit.
    let limit: Int
    private let open = Atomic<Int>(0)

    init(limit: Int) { self.limit = limit }

    /// Takes a place for a new connection; false when the listener is full.
    func admit() -> Bool {
        let now = open.add(1, ordering: .relaxed).newValue
        guard limit > 0, now > limit else { return true }
        open.subtract(1, ordering: .relaxed)
        return false
    }

    func release() { open.subtract(1, ordering: .relaxed) }

    var count: Int { open.load(ordering: .relaxed) }
}

/// A listener's connections, each admitted by its ``ConnectionLimiter``: one past the limit is
/// closed as soon as it is accepted, so that clients holding sockets open fill their own
/// listener only (the other port, and the file descriptors the databases need, stay free).
///
/// A refused connection still completes its setup (a failed setup would end the listener's
/// accept loop): it is handed on as ``Value/refused(_:)`` and dropped.
struct LimitedChildChannel<Base: ServerChildChannel>: ServerChildChannel {
    enum Value: ServerChildChannelValue {
        case admitted(Base.Value)
        case refused(any Channel)

        var channel: any Channel {
            switch self {
            case .admitted(let v): v.channel
            case .refused(let c): c
            }
        }
    }

    let base: Base
    let limiter: ConnectionLimiter

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        guard limiter.admit() else {
            channel.close(mode: .all, promise: nil)
            return channel.eventLoop.makeSucceededFuture(.refused(channel))
        }
        let limiter = self.limiter
        channel.closeFuture.whenComplete { _ in limiter.release() }
        return base.setup(channel: channel, logger: logger).map { .admitted($0) }
    }

    func handle(value: Value, logger: Logger) async {
        guard case .admitted(let v) = value else { return }
        await base.handle(value: v, logger: logger)
    }
}

/// The file descriptors the process may open, raised at start to what the configuration asks
/// (Sync Gateway's `maxFileDescriptors`), within the hard limit.
enum FileDescriptorLimit {
    /// The soft limit after raising it (never lowered); nil when the system would not say.
    @discardableResult
    static func raise(to wanted: Int) -> Int? {
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return nil }
        let target = rlim_t(max(0, wanted))
        guard limit.rlim_cur < target else { return Int(clamping: limit.rlim_cur) }
        limit.rlim_cur = min(target, limit.rlim_max)
        _ = setrlimit(resource, &limit)
        guard getrlimit(resource, &limit) == 0 else { return nil }
        return Int(clamping: limit.rlim_cur)
    }

    private static let resource = resourceNumber(RLIMIT_NOFILE)

    // RLIMIT_NOFILE is an enumeration's case in glibc and a plain number elsewhere; the overload
    // that fits turns either into the number getrlimit takes.
    private static func resourceNumber(_ r: Int32) -> Int32 { r }
    private static func resourceNumber<R: RawRepresentable>(_ r: R) -> Int32 where R.RawValue: BinaryInteger {
        Int32(truncatingIfNeeded: r.rawValue)
    }
}
