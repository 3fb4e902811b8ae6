import Foundation
@testable import Strata
import StrataStore
import Testing

final class FixtureSample: ManagedObject {
    @Attribute("count64") var count64: Int
}
final class FixtureOwner: ManagedObject {}

/// Stores made by earlier builds, kept in the repository (`FixtureStores/`),
/// must open in every later one: each is copied aside, verified, read with
/// the model that made it, and migrated to a later model. A new on-disk
/// format or model version adds a fixture (`STRATA_WRITE_FIXTURES=1 swift
/// test --filter FixtureStoreTests` writes the current one).
@Suite struct FixtureStoreTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("FixtureStores")
    /// The fixture this build writes: engine format 1, schema format 4, records format 1.
    static let current = "engine1-schema4-records1"
    /// This build's fixture migrated to version 2 (its history in format 2:
    /// the index added to `count64` has an index number of its own).
    static let currentMigrated = "migrated-engine1-schema4-records1-history2"

    /// Version 1 holds every attribute type and both kinds of relationship;
    /// version 2 renames `label`, adds `extra`, and indexes `count64`.
    static func model(version: Int) -> ManagedObjectModel {
        let label: PropertyDescription = version == 1
            ? .attribute("label", .string) : .attribute("title", .string, renamedFrom: "label")
        let extra: [PropertyDescription] = version == 1 ? [] : [.attribute("extra", .integer32, defaultValue: .integer(7))]
        return try! ManagedObjectModel(entities: [
            EntityDescription(name: "Owner", managedObjectClass: FixtureOwner.self, properties: [
                .attribute("name", .string),
                .toMany("samples", "Sample", inverse: "owner", deleteRule: .cascade),
            ]),
            EntityDescription(name: "Sample", managedObjectClass: FixtureSample.self, properties: [
                label,
                .attribute("count16", .integer16),
                .attribute("count32", .integer32),
                .attribute("count64", .integer64, defaultValue: .integer(0)),
                .attribute("ratio", .double),
                .attribute("flag", .bool),
                .attribute("when", .date),
                .attribute("blob", .binaryData, optional: true),
                .attribute("uuid", .uuid, optional: true),
                .attribute("note", .string, optional: true),
                .toOne("owner", "Owner", inverse: "samples"),
            ] + extra, indexes: version == 1 ? [] : [IndexDescription("count64")]),
        ])
    }

    /// Sample i's values, as "label|…": what every fixture holds.
    static func expected(label: String = "label") -> [String] {
        (0..<3).map { i in
            "S\(i)|\(i - 1)|\(i * 1000)|\(Int64(i) << 40)|\(Double(i) / 4)|\(i % 2 == 0)|\(Date(timeIntervalSinceReferenceDate: Double(i) * 86_400).timeIntervalSinceReferenceDate)|\(i == 1 ? "3" : "-")|\(i == 2 ? "00000000-0000-0000-0000-00000000000\(i)" : "-")|\(i == 0 ? "-" : "note \(i)")|\(i < 2 ? "O0" : "O1")"
        }
    }

    static func describe(_ sample: ManagedObject, label: String) -> String {
        let values: [String] = [
            sample.value(forKey: label) as? String ?? "?",
            "\(sample.value(forKey: "count16") as? Int ?? 99)",
            "\(sample.value(forKey: "count32") as? Int ?? 99)",
            "\(sample.value(forKey: "count64") as? Int ?? 99)",
            "\(sample.value(forKey: "ratio") as? Double ?? 99)",
            "\(sample.value(forKey: "flag") as? Bool ?? false)",
            "\((sample.value(forKey: "when") as? Date)?.timeIntervalSinceReferenceDate ?? -1)",
            (sample.value(forKey: "blob") as? Data).map { "\($0.count)" } ?? "-",
            (sample.value(forKey: "uuid") as? UUID)?.uuidString ?? "-",
            sample.value(forKey: "note") as? String ?? "-",
            (sample.value(forKey: "owner") as? ManagedObject)?.value(forKey: "name") as? String ?? "-",
        ]
        return values.joined(separator: "|")
    }

    static func samples(_ coordinator: PersistentStoreCoordinator, label: String) throws -> [String] {
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        return try context.performAndWait { () throws in
            try context.fetch(FetchRequest<FixtureSample>()).map { describe($0, label: label) }.sorted()
        }
    }

    static func open(_ path: String, _ model: ManagedObjectModel) throws -> PersistentStoreCoordinator {
        let coordinator = PersistentStoreCoordinator(model: model)
        try coordinator.addPersistentStore(.log, directory: path)
        return coordinator
    }

    /// Writes this build's fixtures, when asked (never in CI): the store at
    /// version 1, and a copy migrated to version 2.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["STRATA_WRITE_FIXTURES"] == "1"))
    func writeTheCurrentFixtures() throws {
        let path = Self.directory.appendingPathComponent(Self.current).path
        try Self.writeFixture(at: path)
        let migrated = Self.directory.appendingPathComponent(Self.currentMigrated).path
        try? FileManager.default.removeItem(atPath: migrated)
        try FileManager.default.copyItem(atPath: path, toPath: migrated)
        try Self.open(migrated, Self.model(version: 2)).close()
    }

    static func writeFixture(at path: String) throws {
        try? FileManager.default.removeItem(atPath: path)
        let model = Self.model(version: 1)
        let coordinator = try open(path, model)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            let owners = (0..<2).map { i -> ManagedObject in
                let owner = FixtureOwner(context: context)
                owner.setValue("O\(i)", forKey: "name")
                return owner
            }
            for i in 0..<3 {
                if i == 2 {
                    // The first two samples go to a segment, the last stays in the log.
                    try context.save()
                    try coordinator.compactStore()
                }
                let sample = FixtureSample(context: context)
                sample.setValue("S\(i)", forKey: "label")
                sample.setValue(Int16(i - 1), forKey: "count16")
                sample.setValue(Int32(i * 1000), forKey: "count32")
                sample.setValue(Int64(i) << 40, forKey: "count64")
                sample.setValue(Double(i) / 4, forKey: "ratio")
                sample.setValue(i % 2 == 0, forKey: "flag")
                sample.setValue(Date(timeIntervalSinceReferenceDate: Double(i) * 86_400), forKey: "when")
                sample.setValue(i == 1 ? Data([1, 2, 3]) : nil, forKey: "blob")
                sample.setValue(i == 2 ? UUID(uuidString: "00000000-0000-0000-0000-00000000000\(i)") : nil, forKey: "uuid")
                sample.setValue(i == 0 ? nil : "note \(i)", forKey: "note")
                sample.setValue(owners[i < 2 ? 0 : 1], forKey: "owner")
            }
            try context.save()
        }
        try coordinator.close()
    }

    /// Every fixture in the repository opens, verifies, reads as written,
    /// and migrates to version 2 of its model.
    @Test func everyFixtureStoreOpensVerifiesAndMigrates() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.directory.path).sorted()
        #expect(names.contains(Self.current))
        for name in names where !name.hasPrefix("migrated-") {
            let scratch = TemporaryDirectory()
            let path = scratch.path + "/" + name
            try FileManager.default.copyItem(atPath: Self.directory.appendingPathComponent(name).path, toPath: path)
            let check = try ObjectStoreInspector(directory: path).verifyRecords()
            #expect(check.problems.isEmpty, "\(name): \(check.problems)")
            let v1 = try Self.open(path, Self.model(version: 1))
            #expect(try Self.samples(v1, label: "label") == Self.expected(), "\(name)")
            try v1.close()
            let v2 = try Self.open(path, Self.model(version: 2))
            #expect(try Self.samples(v2, label: "title") == Self.expected(), "\(name)")
            let context = ManagedObjectContext(.privateQueue, coordinator: v2)
            try context.performAndWait { () throws in
                let extras = try context.fetch(FetchRequest<FixtureSample>()).map { $0.value(forKey: "extra") as? Int }
                #expect(extras == [7, 7, 7])
            }
            try v2.close()
            let migrated = try ObjectStoreInspector(directory: path).verifyRecords()
            #expect(migrated.problems.isEmpty, "\(name): \(migrated.problems)")
        }
    }

    /// Every migrated fixture is at version 2: it verifies, version 1 is
    /// refused as older, and version 2 reads every sample, its index on
    /// `count64` answering a query.
    @Test func everyMigratedFixtureOpensAtVersion2() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.directory.path).sorted().filter { $0.hasPrefix("migrated-") }
        #expect(names.contains(Self.currentMigrated))
        for name in names {
            let scratch = TemporaryDirectory()
            let path = scratch.path + "/" + name
            try FileManager.default.copyItem(atPath: Self.directory.appendingPathComponent(name).path, toPath: path)
            let check = try ObjectStoreInspector(directory: path).verifyRecords()
            #expect(check.problems.isEmpty, "\(name): \(check.problems)")
            let error = #expect(throws: StrataError.self) { try Self.open(path, Self.model(version: 1)) }
            #expect(error?.code == .modelMismatch, "\(name)")
            let v2 = try Self.open(path, Self.model(version: 2))
            #expect(try Self.samples(v2, label: "title") == Self.expected(), "\(name)")
            let context = ManagedObjectContext(.privateQueue, coordinator: v2)
            try context.performAndWait { () throws in
                let target = 1 << 40
                let request = FetchRequest<FixtureSample>(predicate: #Predicate { $0.count64 == target })
                #expect(try context.explain(request).index != nil, "\(name)")
                #expect(try context.fetch(request).map { $0.value(forKey: "title") as? String } == ["S1"], "\(name)")
            }
            try v2.close()
        }
    }
}
