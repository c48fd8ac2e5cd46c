extension Database {
    /// Calls `listener` after each committed change (a save, delete, purge, batch or replicated
    /// batch), on a serial background queue, in commit order.
    ///
    /// ```swift
    /// let token = db.addChangeListener { change in
    ///     print("changed:", change.documentIDs)
    /// }
    /// token.remove()
    /// ```
    @discardableResult
    public func addChangeListener(_ listener: @escaping @Sendable (DatabaseChange) -> Void) -> ListenerToken {
        core.hub.add(listener)
    }

    /// Calls `listener` after each committed change to one document: a new revision, a deletion,
    /// the document entering or leaving conflict, a purge.
    ///
    /// ```swift
    /// let token = db.addDocumentChangeListener(withID: "task-1") { change in
    ///     print("new revision \(change.revisionID ?? "-"), conflict: \(change.isConflicted)")
    /// }
    /// ```
    @discardableResult
    public func addDocumentChangeListener(withID id: String,
                                          _ listener: @escaping @Sendable (DocumentChange) -> Void) -> ListenerToken {
        core.hub.add(documentID: id, listener)
    }

    /// The committed changes from now on, as an async sequence; it ends when the database closes.
    ///
    /// ```swift
    /// Task {
    ///     for await change in db.changeEvents() { refresh(change.documentIDs) }
    /// }
    /// ```
    public func changeEvents() -> AsyncStream<DatabaseChange> {
        core.hub.stream()
    }

    /// Adds (or replaces) a validation function, run on every new revision: local saves and
    /// deletions, resolutions and replicated revisions alike (seed 003). A rejection makes the
    /// save throw ``SetteeError/Code/forbidden`` with the validation's message.
    ///
    /// ```swift
    /// db.addValidation(named: "owner") { new, current in
    ///     guard new.isDeleted || new.string(forKey: "owner") != nil else {
    ///         throw SetteeError.forbidden("a document needs an owner")
    ///     }
    /// }
    /// ```
    ///
    /// Validations run inside the write transaction: they must not write to the database.
    public func addValidation(named name: String, _ validation: @escaping Validation) {
        core.validations.withLock { v in
            v.removeAll { $0.name == name }
            v.append((name, validation))
        }
    }

    /// Removes a validation function.
    ///
    /// ```swift
    /// db.removeValidation(named: "owner")
    /// ```
    public func removeValidation(named name: String) {
        core.validations.withLock { $0.removeAll { $0.name == name } }
    }
}
