/// A plain-text table with aligned columns.
struct Table {
    var header: [String]
    var rows: [[String]] = []

    init(_ header: String...) { self.header = header }
    init(_ header: [String]) { self.header = header }

    mutating func add(_ cells: String...) { rows.append(cells) }
    mutating func add(_ cells: [String]) { rows.append(cells) }

    func render() -> String {
        let all = [header] + rows
        let widths = header.indices.map { i in all.map { i < $0.count ? $0[i].count : 0 }.max() ?? 0 }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { i, c in
                let pad = String(repeating: " ", count: widths[i] - c.count)
                return i == 0 ? c + pad : pad + c  // first column left, figures right
            }.joined(separator: "   ")
        }
        let rule = widths.map { String(repeating: "-", count: $0) }.joined(separator: "   ")
        return ([line(header), rule] + rows.map(line)).joined(separator: "\n")
    }
}
