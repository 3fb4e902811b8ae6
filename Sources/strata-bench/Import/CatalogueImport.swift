import Foundation
import Strata

/// The four ways an app's import finds the stored object a record names,
/// each as the docs of Core Data, MagicalRecord and GRDB show it. Every
/// style imports through a background child of the writer and makes each
/// batch durable (the child's save, then the writer's) before the next.
enum CatalogueImportStyle: String, CaseIterable, Sendable {
    /// Every product and category fetched once up front into a key →
    /// object dictionary the importer keeps (the hand-tuned import).
    case dictionary
    /// A new object for every record; the uniqueness constraints and an
    /// object-trump merge policy fold it into the stored one at save.
    case upsert
    /// One `keys.contains($0.sku)` fetch per batch (and one for its
    /// categories), then a dictionary of what it found.
    case inFetch = "in-fetch"
    /// `findOrCreate` per record and per category name (Core Data's and
    /// MagicalRecord's canonical find-or-create).
    case findOrCreate = "find-or-create"
    /// `findOrCreate(where: \.sku, equals: sku, in:)` per record and per
    /// category name: MagicalRecord's `MR_findFirstOrCreateByAttribute:withValue:`,
    /// an attribute and a value, with no `#Predicate` to translate.
    case findOrCreateByKey = "find-or-create-by-key"
}

/// Runs one import style's batches against one store.
final class CatalogueImporter {
    let style: CatalogueImportStyle
    let container: PersistentContainer
    let context: ManagedObjectContext
    private var products: [String: CatalogueProduct] = [:]
    private var categories: [String: CatalogueCategory] = [:]
    private var loaded = false

    init(style: CatalogueImportStyle, container: PersistentContainer) {
        self.style = style
        self.container = container
        context = container.newBackgroundContext(childOfWriter: true)
        if style == .upsert { context.mergePolicy = .mergeByPropertyObjectTrump }
    }

    /// Imports `records` in batches of `batchSize`, each made durable.
    func run(_ records: [CatalogueRecord], batchSize: Int) throws {
        let context = context
        try context.performAndWait { () throws in
            if style == .dictionary && !loaded {
                // The hand-kept dictionary: everything stored, fetched once.
                for product in try context.fetch(FetchRequest<CatalogueProduct>()) { products[product.sku] = product }
                for category in try context.fetch(FetchRequest<CatalogueCategory>()) { categories[category.name] = category }
                loaded = true
            }
            for start in stride(from: 0, to: records.count, by: batchSize) {
                let batch = records[start..<min(start + batchSize, records.count)]
                try importBatch(batch)
                try context.save()
                let writer = container.writerContext
                try writer.performAndWait { () throws(StrataError) in try writer.save() }
            }
        }
    }

    private func importBatch(_ batch: ArraySlice<CatalogueRecord>) throws {
        switch style {
        case .dictionary:
            applyThroughDictionaries(batch)
        case .upsert:
            // New objects throughout; a batch makes each category once.
            var made: [String: CatalogueCategory] = [:]
            for record in batch {
                let names = record.categories.map { name in
                    made[name] ?? {
                        let category = CatalogueCategory(context: context)
                        category.name = name
                        made[name] = category
                        return category
                    }()
                }
                apply(record, to: CatalogueProduct(context: context), categories: names)
            }
        case .inFetch:
            let skus = batch.map(\.sku)
            let names = Array(Set(batch.flatMap(\.categories)))
            products = [:]
            categories = [:]
            for product in try context.fetch(FetchRequest<CatalogueProduct>(predicate: #Predicate { skus.contains($0.sku) })) {
                products[product.sku] = product
            }
            for category in try context.fetch(FetchRequest<CatalogueCategory>(predicate: #Predicate { names.contains($0.name) })) {
                categories[category.name] = category
            }
            applyThroughDictionaries(batch)
        case .findOrCreate:
            for record in batch {
                let sku = record.sku
                let product = try CatalogueProduct.findOrCreate(where: #Predicate { $0.sku == sku }, in: context) { $0.sku = sku }
                let found = try record.categories.map { name in
                    try CatalogueCategory.findOrCreate(where: #Predicate { $0.name == name }, in: context) { $0.name = name }
                }
                apply(record, to: product, categories: found)
            }
        case .findOrCreateByKey:
            for record in batch {
                let product = try CatalogueProduct.findOrCreate(where: \.sku, equals: record.sku, in: context)
                let found = try record.categories.map { name in
                    try CatalogueCategory.findOrCreate(where: \.name, equals: name, in: context)
                }
                apply(record, to: product, categories: found)
            }
        }
    }

    /// Each record applied to the product the dictionary holds for its
    /// SKU, or a new one (kept there too), with its categories likewise.
    private func applyThroughDictionaries(_ batch: ArraySlice<CatalogueRecord>) {
        for record in batch {
            let product = products[record.sku] ?? {
                let made = CatalogueProduct(context: context)
                products[record.sku] = made
                return made
            }()
            apply(record, to: product, categories: record.categories.map { categoryFromDictionary($0) })
        }
    }

    private func categoryFromDictionary(_ name: String) -> CatalogueCategory {
        if let category = categories[name] { return category }
        let made = CatalogueCategory(context: context)
        made.name = name
        categories[name] = made
        return made
    }

    private func apply(_ record: CatalogueRecord, to product: CatalogueProduct, categories: [CatalogueCategory]) {
        product.sku = record.sku
        product.title = record.title
        product.price = record.price
        product.stock = record.stock
        product.categories = Set(categories)
    }

    /// Adds one to the stock of each product `skus` names, fetching each
    /// batch's products with one `IN` fetch; each batch made durable.
    func updateStock(_ skus: [String], batchSize: Int) throws {
        let context = context
        try context.performAndWait { () throws in
            for start in stride(from: 0, to: skus.count, by: batchSize) {
                let keys = Array(skus[start..<min(start + batchSize, skus.count)])
                let found = try context.fetch(FetchRequest<CatalogueProduct>(predicate: #Predicate { keys.contains($0.sku) }))
                guard found.count == keys.count else { throw CatalogueFailure("update pass: \(found.count) of \(keys.count) products found") }
                for product in found { product.stock += 1 }
                try context.save()
                let writer = container.writerContext
                try writer.performAndWait { () throws(StrataError) in try writer.save() }
            }
        }
    }

    /// Every stored product as (sku, stock, category count), and the category count, for checking one store against another.
    func contents() throws -> (products: [String: [Int]], categories: Int) {
        let context = container.newBackgroundContext(childOfWriter: true)
        return try context.performAndWait { () throws in
            var result: [String: [Int]] = [:]
            for product in try context.fetch(FetchRequest<CatalogueProduct>()) {
                result[product.sku] = [product.stock, product.categories.count, Int(product.price * 100)]
            }
            return (result, try context.count(for: FetchRequest<CatalogueCategory>()))
        }
    }
}

struct CatalogueFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
