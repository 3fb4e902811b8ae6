extension StrataStore {
    /// At close: saves the index as the index checkpoint when the store is
    /// large enough and its segments changed since the checkpoint on disk
    /// was made; removes a checkpoint that no longer matches otherwise (it
    /// would only be read and refused). Best effort: a checkpoint is a
    /// cache, and a close does not fail for want of one.
    ///
    /// Called by `close()` once no writer, flush or compaction can run.
    func saveIndexCheckpointIfDue() {
        guard !options.readOnly else { return }
        let (snapshot, infos, readers, checkpointed, found, memtableBytes) = state.withReadLock {
            () -> (KeyIndex, [SegmentInfo], [SegmentReader], [SegmentInfo]?, Bool, Int) in
            let readers = liveSegments.compactMap { info -> SegmentReader? in
                if case .segment(let reader)? = files[info.fileNumber] { return reader }
                return nil
            }
            return (index, liveSegments, readers, checkpointedSegments, checkpointFound, counters.memtableBytes)
        }
        if let checkpointed, checkpointed == infos { return }
        let path = path(IndexCheckpoint.fileName)
        func removeStale() {
            if found { try? fileSystem.remove(path) }
        }
        // The memtable must be empty, not only free of entries the index
        // points to: a deletion there removed its key from the index, which
        // the segments still hold.
        // A damaged index (a chunk of the checkpoint it came from could be
        // neither read nor rebuilt) lacks keys: it is not saved.
        guard writers.withLock({ failure }) == nil, memtableBytes == 0, !infos.isEmpty, readers.count == infos.count,
              snapshot.count >= max(1, options.indexCheckpointMinimumKeys), snapshot.damage == nil
        else { return removeStale() }
        var segments: [IndexCheckpoint.Segment] = []
        for reader in readers {
            guard let trailer = reader.trailerBytes() else { return removeStale() }
            let dead = state.withReadLock { reader.deadRecords }
            segments.append(IndexCheckpoint.Segment(info: reader.info, deadRecords: dead, trailer: trailer, blocks: reader.blocks))
        }
        // Saving reads every chunk not read yet; one of them may turn out damaged.
        guard (try? IndexCheckpoint.write(snapshot, segments: segments, fileSystem: fileSystem, directory: directory)) == true,
              snapshot.damage == nil
        else {
            try? fileSystem.remove(path)
            return
        }
        state.withLock {
            checkpointedSegments = infos
            checkpointFound = true
        }
    }
}
