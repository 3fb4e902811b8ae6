public import Observation

/// Managed objects work with Swift's Observation: in a context that
/// tracks observation (``ManagedObjectContext/tracksObservation``), reading
/// a property inside `withObservationTracking` (or a SwiftUI view's body)
/// registers it, and a change of its value in the context — a write, the
/// inverse side of a relationship kept in step, a merge, a refresh, a
/// rollback, a child's save taken in — tells exactly the observers of that
/// property.
extension ManagedObject: Observable {}

/// What an object keeps for Observation once one of its properties was read
/// with tracking on: the registrar, and which properties were read.
///
/// The registrar tells properties apart by key path. Each property's is
/// the entity's `\ManagedObject.[observedProperty: index]`, made once per
/// entity (``EntityDescription/observationKeyPaths``), so that a read
/// registers it without making the property wrapper's own key path.
final class ObjectObservation {
    let registrar = ObservationRegistrar()
    /// The properties read with tracking on: a bit per property index.
    /// Guarded by the object's context's queue, as the object.
    @exclusivity(unchecked) private var observed: [UInt64] = []

    @inline(__always)
    func note(_ index: Int) {
        if !observes(index) { add(index) }
    }

    private func add(_ index: Int) {
        let word = index >> 6
        if word >= observed.count { observed.append(contentsOf: repeatElement(0, count: word + 1 - observed.count)) }
        observed[word] |= 1 << UInt64(index & 63)
    }

    @inline(__always)
    func observes(_ index: Int) -> Bool {
        let word = index >> 6
        return word < observed.count && observed[word] & (1 << UInt64(index & 63)) != 0
    }

    /// The observed properties among the first `count` that `including` keeps.
    func observedIndices(below count: Int, where including: (Int) -> Bool) -> [Int] {
        (0..<min(count, observed.count * 64)).filter { observes($0) && including($0) }
    }
}

extension ManagedObject {
    /// A stored value by position: the member Observation's key paths name.
    subscript(observedProperty index: Int) -> PropertyValue { values[index] }

    /// Whether the object's context tracks observation (checked by every read).
    @inline(__always)
    final var isObservationTracked: Bool { link?.tracksObservation ?? false }

    /// Registers a read of the property at `index` with Observation, where
    /// the context tracks it.
    final func observeAccess(at index: Int) {
        let observation = self.observation ?? {
            let made = ObjectObservation()
            self.observation = made
            return made
        }()
        observation.note(index)
        observation.registrar.access(self, keyPath: entity.observationKeyPaths[index])
    }

    /// Runs `change`, which sets the value at `index`, between Observation's
    /// will-set and did-set for that property.
    @inline(__always)
    final func changingValue(at index: Int, _ change: () -> Void) {
        guard let observation, observation.observes(index) else { return change() }
        let keyPath = entity.observationKeyPaths[index]
        observation.registrar.willSet(self, keyPath: keyPath)
        change()
        observation.registrar.didSet(self, keyPath: keyPath)
    }

    /// Replaces every value, telling Observation of each observed property
    /// whose value differs (a merge, a refresh, a rollback, a child's save).
    final func replaceValues(with new: [PropertyValue]) {
        guard let observation else {
            values = new
            return
        }
        let old = values
        let changed = observation.observedIndices(below: new.count) { $0 >= old.count || old[$0] != new[$0] }
        let keyPaths = entity.observationKeyPaths
        for index in changed { observation.registrar.willSet(self, keyPath: keyPaths[index]) }
        values = new
        for index in changed { observation.registrar.didSet(self, keyPath: keyPaths[index]) }
    }
}

extension ManagedObjectContext {
    /// Whether this context's objects work with Swift's Observation: a
    /// property read inside `withObservationTracking` (or a SwiftUI view)
    /// registers it, and a change of it here tells its observers — see
    /// ``ManagedObject``. On by default for a `.mainQueue` context (where a
    /// user interface reads), off for the others, whose reads (an import,
    /// a server's requests) then pay nothing for it. Set it on the
    /// context's queue, before the reads to be tracked.
    ///
    /// ```swift
    /// withObservationTracking {
    ///     label.text = bookmark.title
    /// } onChange: {
    ///     // called when bookmark.title changes in its context
    /// }
    /// ```
    public var tracksObservation: Bool {
        get { link.tracksObservation }
        set {
            checkQueue(function: "tracksObservation")
            link.tracksObservation = newValue
        }
    }
}
