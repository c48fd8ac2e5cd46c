import Crypto
import _CryptoExtras
import Foundation
import Synchronization

/// A password kept as Sync Gateway and CouchDB keep one: never itself, only a salted PBKDF2-SHA256
/// hash, compared in constant time.
struct PasswordHash: Sendable, Equatable {
    /// swift-crypto's floor for PBKDF2 (OWASP's figure for PBKDF2-SHA256 in 2023).
    static let rounds = 210_000
    var salt: [UInt8]
    var hash: [UInt8]
    var rounds: Int

    /// A new hash of `password` with a random salt.
    init(password: String) {
        var salt = [UInt8](repeating: 0, count: 16)
        var rng = SystemRandomNumberGenerator()
        for i in salt.indices { salt[i] = UInt8.random(in: 0 ... 255, using: &rng) }
        self.init(password: password, salt: salt, rounds: Self.rounds)
    }

    init(password: String, salt: [UInt8], rounds: Int) {
        self.salt = salt
        self.rounds = rounds
        self.hash = Self.derive(password, salt: salt, rounds: rounds)
    }

    init(salt: [UInt8], hash: [UInt8], rounds: Int) {
        self.salt = salt
        self.hash = hash
        self.rounds = rounds
    }

    private static func derive(_ password: String, salt: [UInt8], rounds: Int) -> [UInt8] {
        // PBKDF2 fails only for parameters this type never passes (an empty output, too few rounds).
        guard let key = try? KDF.Insecure.PBKDF2.deriveKey(from: Array(password.utf8), salt: salt, using: .sha256,
                                                           outputByteCount: 32, rounds: rounds) else {
            return []
        }
        return key.withUnsafeBytes { Array($0) }
    }

    /// Whether `password` is the one hashed: every byte compared, whatever the first difference.
    func matches(_ password: String) -> Bool {
        let candidate = Self.derive(password, salt: salt, rounds: rounds)
        guard candidate.count == hash.count, !hash.isEmpty else { return false }
        var difference: UInt8 = 0
        for i in hash.indices { difference |= candidate[i] ^ hash[i] }
        return difference == 0
    }

    /// Spends the time a check would, for a user that does not exist, so that a wrong password
    /// and an unknown user take as long.
    static func spendCheckTime() {
        _ = derive("", salt: [UInt8](repeating: 0, count: 16), rounds: Self.rounds)
    }
}

/// A user of one database, as the server keeps it.
struct User: Sendable, Equatable {
    var name: String
    var password: PasswordHash?
    var adminChannels: [String]
    var adminRoles: [String]
    var disabled: Bool
    var email: String?
    /// For a user made by signing up: the database's last sequence when it was made. What
    /// documents granted its name up to then (before anyone could have chosen it) is not its;
    /// what they grant it afterwards is.
    var grantsFrom: UInt64? = nil

    static let guestName = "GUEST"
    var isGuest: Bool { name == Self.guestName }
}

/// A role of one database.
struct Role: Sendable, Equatable {
    var name: String
    var adminChannels: [String]
}

/// Who a request acts as, once authenticated.
enum Principal: Sendable, Equatable {
    /// The admin port: no credentials, no access checks.
    case admin
    /// An authenticated user, or GUEST for an anonymous request when GUEST is enabled.
    case user(String)

    var name: String? {
        if case .user(let n) = self { return n }
        return nil
    }
}
