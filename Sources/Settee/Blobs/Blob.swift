import Foundation

/// Binary content attached to a document (an attachment): an image, a PDF, anything.
///
/// A blob lives in a document property as a dictionary
/// `{"@type": "blob", "content_type": …, "digest": "sha1-…", "length": …}`; its content is
/// stored once per digest in the database's blob store when the document is saved, streamed,
/// of any size.
///
/// ```swift
/// let photo = Blob(contentType: "image/jpeg", data: jpegData)
/// let doc = MutableDocument(id: "profile")
/// doc.setBlob(photo, forKey: "avatar")
/// try db.saveDocument(doc)
///
/// let video = try Blob(contentType: "video/mp4", fileURL: url)   // streamed, never in memory
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct Blob: Sendable, Hashable, CustomStringConvertible {
    /// The MIME type.
    ///
    /// ```swift
    /// print(blob.contentType)   // "image/jpeg"
    /// ```
    public let contentType: String
    /// The content's size in bytes.
    ///
    /// ```swift
    /// print(blob.length)
    /// ```
    public let length: UInt64
    /// `sha1-` and the base64 SHA-1 of the content: its identity in the blob store.
    ///
    /// ```swift
    /// print(blob.digest)   // "sha1-qUqP5cyxm6YcTAhz05Hph5gvu9M="
    /// ```
    public let digest: String

    enum Source: Sendable {
        case memory(Data)
        case file(URL)
        case stored(BlobStore)
        case missing
    }
    let source: Source

    /// A blob from bytes in memory.
    ///
    /// ```swift
    /// let blob = Blob(contentType: "text/plain", data: Data("hello".utf8))
    /// ```
    public init(contentType: String, data: Data) {
        self.contentType = contentType
        self.length = UInt64(data.count)
        var sha = SHA1()
        data.withUnsafeBytes { sha.update($0) }
        self.digest = BlobStore.digestString(sha.finalize())
        self.source = .memory(data)
    }

    /// A blob whose content is a file, read in chunks now (for the digest) and again when the
    /// document is saved: any size, never held in memory. The file must not change until then.
    ///
    /// ```swift
    /// let blob = try Blob(contentType: "video/mp4", fileURL: URL(fileURLWithPath: "/tmp/clip.mp4"))
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/io`` when the file cannot be read.
    public init(contentType: String, fileURL: URL) throws {
        let (digest, length) = try BlobStore.hashFile(atPath: fileURL.path)
        self.contentType = contentType
        self.digest = digest
        self.length = length
        self.source = .file(fileURL)
    }

    init(contentType: String, digest: String, length: UInt64, source: Source) {
        self.contentType = contentType
        self.digest = digest
        self.length = length
        self.source = source
    }

    /// Reads a blob reference out of document properties; nil unless it is one.
    init?(properties o: [String: JSONValue], store: BlobStore?) {
        guard o["@type"] == .string("blob"), case .string(let digest)? = o["digest"],
              BlobStore.fileName(forDigest: digest) != nil,
              let length = o["length"]?.int64Value, length >= 0 else { return nil }
        self.init(contentType: o["content_type"]?.stringValue ?? "application/octet-stream",
                  digest: digest, length: UInt64(length), source: store.map { .stored($0) } ?? .missing)
    }

    /// The dictionary that stands for this blob inside a document.
    ///
    /// ```swift
    /// doc.setValue(.array([.object(blob.properties)]), forKey: "pages")
    /// ```
    public var properties: [String: JSONValue] {
        ["@type": "blob", "content_type": .string(contentType), "digest": .string(digest),
         "length": .int(Int64(clamping: length))]
    }

    /// Whether the content is not in a blob store yet.
    var needsInstall: Bool {
        switch source {
        case .memory, .file: return true
        case .stored, .missing: return false
        }
    }

    /// The whole content in memory; nil when it is not available (for a large blob prefer
    /// ``contentStream``).
    ///
    /// ```swift
    /// if let bytes = blob.content { image = UIImage(data: bytes) }
    /// ```
    public var content: Data? {
        switch source {
        case .memory(let d): return d
        case .file(let url): return try? Data(contentsOf: url)
        case .stored(let store): return store.data(forDigest: digest)
        case .missing: return nil
        }
    }

    /// A stream over the content, read from disk in chunks; nil when it is not available.
    ///
    /// ```swift
    /// if let stream = blob.contentStream {
    ///     stream.open(); defer { stream.close() }
    ///     var buffer = [UInt8](repeating: 0, count: 1 << 16)
    ///     while stream.hasBytesAvailable, case let n = stream.read(&buffer, maxLength: buffer.count), n > 0 { … }
    /// }
    /// ```
    public var contentStream: InputStream? {
        switch source {
        case .memory(let d): return InputStream(data: d)
        case .file(let url): return InputStream(url: url)
        case .stored(let store): return store.stream(forDigest: digest)
        case .missing: return nil
        }
    }

    /// Blobs are equal when digest, type and length are.
    ///
    /// ```swift
    /// if doc.blob(forKey: "a") == other.blob(forKey: "a") { … }
    /// ```
    public static func == (a: Blob, b: Blob) -> Bool {
        a.digest == b.digest && a.contentType == b.contentType && a.length == b.length
    }

    /// Hashes the digest.
    ///
    /// ```swift
    /// let unique = Set(blobs)
    /// ```
    public func hash(into h: inout Hasher) { h.combine(digest) }

    /// Type, length and digest, never the content.
    ///
    /// ```swift
    /// print(blob)   // Blob(image/png, 1024 bytes, sha1-…)
    /// ```
    public var description: String { "Blob(\(contentType), \(length) bytes, \(digest))" }
}
