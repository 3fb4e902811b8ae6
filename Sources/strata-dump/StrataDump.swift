import ArgumentParser
import Foundation
import Strata
import StrataStore

/// `strata-dump`: looks inside a Strata store without changing it.
///
/// A thin layer: it parses arguments, calls `StoreInspector`,
/// `ObjectStoreInspector` and `StoreReports`, and prints what they return.
@main
struct StrataDump: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "strata-dump",
        abstract: "Inspects a Strata store read-only.",
        discussion: """
            Never modifies the store: files are only listed and read (O_RDONLY); LOCK is not \
            created, opened or locked, so a store another process has open can be inspected \
            (it is seen as it is at that moment).

            Exit status: 0 success (verify: clean, perhaps with warnings: a torn tail of the \
            last log, which an open cuts off); 1 corruption found (one line per problem, \
            naming the file and offset); 2 the store cannot be inspected (missing, not a store, \
            unreadable) or the object asked for does not exist; 64 bad arguments.
            """,
        subcommands: [Info.self, WAL.self, Segments.self, Get.self, Entity.self, History.self, Explain.self, Verify.self]
    )
}

struct StoreArguments: ParsableArguments {
    @Argument(help: "The store's directory.")
    var directory: String

    @Flag(help: "Print JSON instead of text.")
    var json = false
}

// MARK: Subcommands

struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Files, sequence range, live and dead records, objects per entity, model hash, store identity.")
    @OptionGroup var store: StoreArguments

    func run() throws {
        try reportingErrors {
            let info = try StoreReports.info(directory: store.directory)
            if store.json { return try printJSON(info) }
            let s = info.store
            print("store       \(s.directory)")
            print("files       \(s.files.count)")
            let width = s.files.map(\.name.count).max() ?? 0
            for file in s.files {
                print("  \(pad(file.name, width))  \(pad(file.kind.rawValue, 18))  \(leftPad(bytes(file.size), 12))\(file.isLive ? "" : "  (not live)")")
            }
            let m = s.manifest
            print("manifest    log number \(m.logNumber), next file number \(m.nextFileNumber), last flushed sequence \(m.lastSequence), \(m.segments.count) segment\(m.segments.count == 1 ? "" : "s")")
            let r = s.records
            if let first = r.firstSequence, let last = r.lastSequence {
                print("sequences   \(first)–\(last)")
            } else {
                print("sequences   none")
            }
            print("live        \(plural(r.liveRecords, "record")), \(bytes(r.liveBytes))")
            print("dead        \(plural(r.deadRecords, "record")), \(bytes(r.deadBytes))")
            print("tombstones  \(plural(r.tombstones, "record")), \(bytes(r.tombstoneBytes))")
            if let objects = info.objects {
                print("model hash  \(objects.modelHash)")
                print("identity    \(objects.storeIdentifier ?? "none")")
                if objects.schemaGenerations.count > 1 {
                    print("schemas     \(objects.schemaGenerations.count) generations, \(plural(objects.recordsAwaitingUpgrade, "record")) awaiting upgrade")
                    for generation in objects.schemaGenerations {
                        let entities = zip(generation.entities, generation.entityHashes).map { "\($0) \($1)" }
                        print("  \(generation.generation)  model \(generation.modelHash)  \(plural(generation.records, "record")) written")
                        for entity in entities { print("       \(entity)") }
                    }
                    for file in objects.recordsPerFile {
                        let counts = file.records.enumerated().map { "\($1) of generation \($0)" }.joined(separator: ", ")
                        print("  in \(file.file): \(counts)")
                    }
                }
                if objects.recordsAwaitingRemoval > 0 || objects.indexEntriesAwaitingRemoval > 0 {
                    print("unread      \(plural(objects.recordsAwaitingRemoval, "record")) and "
                          + "\(plural(objects.indexEntriesAwaitingRemoval, "index entry", "index entries")) awaiting removal")
                }
                if let history = objects.history {
                    let kept = history.transactions == 0 ? "none kept" : "#\(history.oldest)–#\(history.newest)"
                    print("history     \(plural(history.transactions, "transaction")), \(bytes(UInt64(history.bytes))), \(kept)"
                          + (history.pruned > 0 ? ", pruned through #\(history.pruned)" : ""))
                    for (name, number) in history.cursors.sorted(by: { $0.key < $1.key }) { print("  cursor \(name) at #\(number)") }
                }
                print("objects     \(objects.entities.reduce(0) { $0 + $1.objects })")
                let width = objects.entities.map(\.entity.count).max() ?? 0
                for entity in objects.entities {
                    print("  \(pad(entity.entity, width))  \(leftPad(String(entity.objects), 8))" + (entity.nextPrimaryKey.map { "  (next key \($0))" } ?? ""))
                    for index in entity.indexes {
                        print("    index (\(index.attributes.joined(separator: ", ")))  \(plural(index.entries, "entry", "entries"))")
                    }
                }
            } else {
                print("objects     \(info.objectLayerNote ?? "none")")
            }
            for note in s.notes { print("note        \(note)") }
        }
    }
}

struct WAL: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wal",
        abstract: "Each batch of each write-ahead log: offset, sequence, operations, bytes, checksum status.")
    @OptionGroup var store: StoreArguments

    func run() throws {
        try reportingErrors {
            let logs = try StoreInspector(directory: store.directory).logs()
            if store.json { return try printJSON(logs) }
            if logs.isEmpty { print("no logs") }
            for log in logs {
                let salt = log.salt.map { "salt " + hex($0) } ?? "no valid header"
                print("\(log.file)  \(log.isLive ? "live" : "not live (flushed; the next open deletes it)"), \(bytes(log.size)), \(salt), \(log.frames.filter { $0.status == .ok }.count) batches")
                if log.frames.isEmpty { continue }
                print("  \(leftPad("offset", 10))  \(leftPad("sequence", 10))  \(leftPad("ops", 6))  \(leftPad("bytes", 10))  status")
                for frame in log.frames {
                    let sequence = frame.sequence.map(String.init) ?? "-"
                    let operations = frame.operations.map(String.init) ?? "-"
                    let status = frame.status.rawValue + (frame.problem.map { " (\($0))" } ?? "")
                    print("  \(leftPad(String(frame.offset), 10))  \(leftPad(sequence, 10))  \(leftPad(operations, 6))  \(leftPad(String(frame.bytes), 10))  \(status)")
                }
            }
        }
    }
}

struct Segments: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Per segment: blocks, records, compressed and raw bytes, key and sequence ranges.")
    @OptionGroup var store: StoreArguments

    func run() throws {
        try reportingErrors {
            let segments = try StoreReports.segments(directory: store.directory)
            if store.json { return try printJSON(segments) }
            if segments.isEmpty { print("no segments") }
            for s in segments {
                print("\(s.file)  \(s.isLive ? "live" : "not live (not in the manifest)"), \(bytes(s.size)), footer \(s.footerStatus)")
                print("  records    \(s.records) (\(s.puts) puts, \(s.deletes) deletes), sequences \(s.minimumSequence)–\(s.maximumSequence)")
                print("  blocks     \(s.blocks.count), \(s.storedBytes) bytes stored / \(s.rawBytes) raw, ratio \(String(format: "%.2f", s.compressionRatio))")
                print("  keys       \(s.firstKey?.text ?? "-") … \(s.lastKey?.text ?? "-")")
                for b in s.blocks {
                    print("    block \(b.index) @ \(b.offset): \(b.records) records, \(b.storedBytes)/\(b.rawBytes) bytes, \(b.firstKey?.text ?? "-") … \(b.lastKey?.text ?? "-")")
                }
            }
        }
    }
}

struct Get: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "One object, decoded with the model stored in the store.")
    @OptionGroup var store: StoreArguments
    @Argument(help: "The object's ID: Recipe/p42 or x-strata:/Recipe/p42.")
    var id: String

    func run() throws {
        try reportingErrors {
            let inspector = try ObjectStoreInspector(directory: store.directory)
            let objectID = try inspector.objectID(parsing: id)
            guard let object = try inspector.object(objectID) else {
                throw DumpFailure(message: "no object \(objectID) in the store", status: 2)
            }
            if store.json { return try printJSON(object) }
            print(object)
        }
    }
}

struct Entity: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The objects of one entity, in primary-key order, decoded with the stored model.")
    @OptionGroup var store: StoreArguments
    @Argument(help: "The entity's name.")
    var name: String
    @Option(help: "Show at most this many objects.")
    var limit: Int?

    func validate() throws {
        if let limit, limit < 0 { throw ValidationError("--limit must not be negative") }
    }

    func run() throws {
        try reportingErrors {
            let objects = try ObjectStoreInspector(directory: store.directory).objects(ofEntity: name, limit: limit ?? .max)
            if store.json { return try printJSON(objects) }
            if objects.isEmpty { print("no \(name) objects") }
            print(objects.map(\.description).joined(separator: "\n\n"))
        }
    }
}

struct History: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The store's persistent history: each transaction after a number, with its author and the objects it changed.")
    @OptionGroup var store: StoreArguments
    @Option(help: "Show the transactions after this number (default: every one kept).")
    var after: UInt64 = 0
    @Option(help: "Show at most this many transactions.")
    var limit: Int?

    func validate() throws {
        if let limit, limit < 0 { throw ValidationError("--limit must not be negative") }
    }

    func run() throws {
        try reportingErrors {
            let transactions = try ObjectStoreInspector(directory: store.directory).history(after: after, limit: limit ?? .max)
            if store.json { return try printJSON(transactions) }
            if transactions.isEmpty { print("no transactions after #\(after)") }
            for transaction in transactions {
                print("#\(transaction.number)  \(transaction.timestamp)  author \(transaction.author ?? "-")  context \(transaction.contextName ?? "-")")
                if !transaction.inserted.isEmpty { print("  inserted  \(transaction.inserted.joined(separator: " "))") }
                for update in transaction.updated { print("  updated   \(update.object) (\(update.properties.joined(separator: ", ")))") }
                if !transaction.deleted.isEmpty { print("  deleted   \(transaction.deleted.joined(separator: " "))") }
                for (object, values) in (transaction.tombstones ?? [:]).sorted(by: { $0.key < $1.key }) {
                    print("  kept      \(object) (\(values.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")))")
                }
            }
        }
    }
}

struct Explain: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "How a fetch with a condition reads the store: which index, within which bounds, or a scan.",
        discussion: """
            The condition is text: terms joined by AND, each `attribute op value` (=, !=, <, <=, >, >=), \
            `attribute IN (v1, v2)` or `attribute STARTS WITH 'text'`; strings quoted, dates as ISO 8601. \
            Example: strata-dump explain store Recipe --where "servings IN (2, 4) AND rating >= 3"
            """)
    @OptionGroup var store: StoreArguments
    @Argument(help: "The entity's name.")
    var name: String
    @Option(name: .customLong("where"), help: "The condition, as text.")
    var condition: String?
    @Option(name: .customLong("group-by"), parsing: .upToNextOption, help: "Explain a count per group of these attributes.")
    var groupBy: [String] = []

    func run() throws {
        try reportingErrors {
            let inspector = try ObjectStoreInspector(directory: store.directory)
            let plan = try inspector.explain(entity: name, where: condition, groupBy: groupBy)
            if store.json { return try printJSON(["plan": plan]) }
            print(plan)
            if let entity = inspector.model.entity(named: name) {
                print("indexes: " + (entity.indexes.isEmpty ? "none" : entity.indexes.map(String.init(describing:)).joined(separator: ", ")))
            }
        }
    }
}

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Checks every checksum and that every record decodes; exit status 1 on corruption (a torn log tail an open cuts off is a warning).")
    @OptionGroup var store: StoreArguments

    func run() throws {
        try reportingErrors {
            let result = try StoreReports.verify(directory: store.directory)
            if store.json {
                try printJSON(result)
            } else {
                for file in result.store.checked {
                    let what = switch file.kind {
                    case .segment: "\(plural(file.units, "block")), \(plural(file.records, "record"))"
                    case .log: "\(plural(file.units, "batch", "batches")), \(plural(file.records, "record"))"
                    default: "\(plural(file.records, "segment")) listed"
                    }
                    print("\(file.ok ? "ok  " : "BAD ") \(file.file): \(what)")
                }
                if let note = result.objectLayerNote {
                    print("note \(note)")
                } else {
                    print("\(result.recordProblems.isEmpty ? "ok  " : "BAD ") records: \(result.recordsChecked) decoded under the stored model")
                }
                for note in result.store.notes { print("note \(note)") }
                for warning in result.store.warnings { print("warning: \(warning.message)") }
                for problem in result.problems { print("corrupt: \(problem)") }
                let warnings = result.store.warnings.isEmpty ? "" : " (\(plural(result.store.warnings.count, "warning")))"
                print(result.isClean ? "clean" + warnings : "\(result.problems.count) problem\(result.problems.count == 1 ? "" : "s") found" + warnings)
            }
            if !result.isClean { throw ExitCode(1) }
        }
    }
}

// MARK: Output and errors

/// A failure to report in one line, with an exit status.
struct DumpFailure: Error {
    var message: String
    var status: Int32
}

/// Runs `body`; any error becomes ONE line on stderr and a non-zero exit
/// status: 1 for corruption, 2 for a store that cannot be inspected or an
/// object that does not exist.
func reportingErrors(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let exit as ExitCode {
        throw exit
    } catch {
        let (message, status) = describe(error)
        let line = "strata-dump: " + message.split(whereSeparator: \.isNewline).joined(separator: " ") + "\n"
        FileHandle.standardError.write(Data(line.utf8))
        throw ExitCode(status)
    }
}

func describe(_ error: any Error) -> (String, Int32) {
    switch error {
    case let failure as DumpFailure:
        return (failure.message, failure.status)
    case let error as StoreError:
        let place = error.path.map { path in path + (error.offset.map { " at offset \($0)" } ?? "") + ": " } ?? ""
        let reason = error.errno.map { " (\(String(cString: strerror($0))))" } ?? ""
        let corrupt = error.code == .corruption || error.code == .unsupportedVersion
        return ((corrupt ? place : "") + error.message + reason, corrupt ? 1 : 2)
    case let error as StrataError:
        if let cause = error.cause as? StoreError { return describe(cause) }
        return (error.message, error.code == .corruptRecord ? 1 : 2)
    default:
        return ("\(error)", 2)
    }
}

func printJSON(_ value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    print(String(decoding: try encoder.encode(value), as: UTF8.self))
}

func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}

func leftPad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
}

func bytes(_ count: UInt64) -> String { count == 1 ? "1 byte" : "\(count) bytes" }

func plural(_ count: Int, _ one: String, _ many: String? = nil) -> String {
    "\(count) " + (count == 1 ? one : many ?? one + "s")
}

func hex(_ value: UInt32) -> String {
    let digits = String(value, radix: 16)
    return "0x" + String(repeating: "0", count: 8 - digits.count) + digits
}
