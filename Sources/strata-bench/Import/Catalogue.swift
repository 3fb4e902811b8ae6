import Foundation
import Strata

/// A product of the catalogue `strata-bench import` imports: a unique SKU,
/// a title, a price, a stock count, and the categories it is filed under.
final class CatalogueProduct: ManagedObject {
    @Attribute("sku") var sku: String
    @Attribute("title") var title: String
    @Attribute("price") var price: Double
    @Attribute("stock") var stock: Int
    @Relationship("categories") var categories: Set<CatalogueCategory>
}

/// A category of the catalogue: a unique name, and its products.
final class CatalogueCategory: ManagedObject {
    @Attribute("name") var name: String
    @Relationship("products") var products: Set<CatalogueProduct>
}

/// The catalogue's model: both keys under a uniqueness constraint (which
/// is what an upsert import merges by, and what the lookups read).
func makeCatalogueModel() throws -> ManagedObjectModel {
    try ManagedObjectModel(entities: [
        EntityDescription(name: "Product", managedObjectClass: CatalogueProduct.self, properties: [
            .attribute("sku", .string),
            .attribute("title", .string),
            .attribute("price", .double),
            .attribute("stock", .integer64),
            .toMany("categories", "Category", inverse: "products"),
        ], uniquenessConstraints: [["sku"]]),
        EntityDescription(name: "Category", managedObjectClass: CatalogueCategory.self, properties: [
            .attribute("name", .string),
            .toMany("products", "Product", inverse: "categories"),
        ], uniquenessConstraints: [["name"]]),
    ])
}

/// One record of a feed an app imports.
struct CatalogueRecord: Sendable, Equatable {
    var sku: String
    var title: String
    var price: Double
    var stock: Int
    var categories: [String]
}

/// Records shaped like a real catalogue, the same for every run: SKUs of
/// skewed lengths (most short, a long tail up to about 120 characters,
/// some non-ASCII), titles of a few words, one to eight categories each out
/// of `categoryCount`, drawn with a skew (a few categories hold most
/// products, as real ones do).
struct CatalogueData {
    let categoryNames: [String]

    init(categoryCount: Int = 2_000) {
        var random = SplitMix64(seed: 0xCA7A_1061)
        categoryNames = (0..<categoryCount).map { n in
            let words = (0..<(1 + Int(random.next() % 3))).map { _ in Self.words[Int(random.next() % UInt64(Self.words.count))] }
            return words.joined(separator: " ").capitalized + " \(n)"
        }
    }

    /// Record `n` (its key is unique to `n`); `revision` changes its stock
    /// and price, as a later feed of the same product would.
    func record(_ n: Int, revision: Int = 0) -> CatalogueRecord {
        var random = SplitMix64(seed: UInt64(n) &* 0x9E37_79B9_7F4A_7C15 &+ 17)
        // Lengths: geometric, so most keys are short and a few are long.
        var tail = 0
        while tail < 110 && random.next() % 4 != 0 { tail += 1 + Int(random.next() % 6) }
        var sku = "SKU-" + String(n, radix: 36, uppercase: true) + "-"
        for _ in 0..<tail { sku.append(Self.skuCharacters[Int(random.next() % UInt64(Self.skuCharacters.count))]) }
        let titleWords = 2 + Int(random.next() % 9)
        let title = (0..<titleWords).map { _ in Self.words[Int(random.next() % UInt64(Self.words.count))] }.joined(separator: " ")
        let categoryCount = 1 + Int(random.next() % 8)
        var categories: [String] = []
        for _ in 0..<categoryCount {
            // Skewed: the square of a uniform draw favours low numbers.
            let u = Double(random.next() % 1_000_000) / 1_000_000
            let name = categoryNames[min(categoryNames.count - 1, Int(u * u * Double(categoryNames.count)))]
            if !categories.contains(name) { categories.append(name) }
        }
        let base = Double(random.next() % 100_000) / 100
        return CatalogueRecord(sku: sku, title: title, price: base + Double(revision), stock: Int(random.next() % 500) + revision * 7,
                               categories: categories)
    }

    static let skuCharacters: [Character] = Array("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789-_éüø")
    static let words = [
        "steel", "oak", "blue", "compact", "travel", "kitchen", "garden", "pro", "mini", "classic", "wireless", "organic",
        "cotton", "glass", "lamp", "chair", "kettle", "cable", "adapter", "bottle", "jacket", "boots", "tent", "drill",
        "charger", "speaker", "mug", "pan", "knife", "shelf", "rug", "pillow", "desk", "case", "band", "watch",
    ]
}

/// What the process holds and has written, from /proc (Linux; zeros elsewhere).
enum ProcessFigures {
    /// Resident and peak resident memory, in MiB.
    static func memory() -> (resident: Double, peak: Double) {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return (0, 0) }
        func field(_ name: String) -> Double {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return 0 }
            return Double(line.split(separator: " ").dropFirst().first.map(String.init) ?? "0").map { $0 / 1024 } ?? 0
        }
        return (field("VmRSS"), field("VmHWM"))
    }

    /// Bytes this process has passed to write(2) and its kin so far.
    static func bytesWritten() -> Int {
        guard let io = try? String(contentsOfFile: "/proc/self/io", encoding: .utf8),
              let line = io.split(separator: "\n").first(where: { $0.hasPrefix("wchar:") }) else { return 0 }
        return Int(line.split(separator: " ").last ?? "0") ?? 0
    }

    /// The bytes of every file under `path`.
    static func size(of path: String) -> Int {
        guard let walker = FileManager.default.enumerator(atPath: path) else { return 0 }
        var total = 0
        for case let file as String in walker {
            let attributes = try? FileManager.default.attributesOfItem(atPath: path + "/" + file)
            if attributes?[.type] as? FileAttributeType == .typeRegular { total += (attributes?[.size] as? Int) ?? 0 }
        }
        return total
    }
}
