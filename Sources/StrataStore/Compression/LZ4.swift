import CLZ4

/// LZ4 block compression over liblz4, for segment blocks.
///
/// Blocks are compressed whole (4–64 KiB), never record by record: LZ4 needs
/// some history to find matches, and per-block framing keeps random reads cheap.
package enum LZ4 {
    /// The largest output `compress` can produce for `count` input bytes.
    package static func bound(_ count: Int) -> Int {
        Int(LZ4_compressBound(Int32(clamping: count)))
    }

    /// Compresses `input`, appending to `output`; returns the compressed length.
    package static func compress(_ input: UnsafeRawBufferPointer, appendingTo output: inout [UInt8]) -> Int {
        let start = output.count
        let capacity = bound(input.count)
        output.append(contentsOf: repeatElement(0, count: capacity))
        let written = output.withUnsafeMutableBytes { out -> Int32 in
            guard let src = input.baseAddress, input.count > 0 else { return 0 }
            let dst = out.baseAddress!.advanced(by: start).assumingMemoryBound(to: CChar.self)
            return LZ4_compress_default(src.assumingMemoryBound(to: CChar.self), dst, Int32(input.count), Int32(capacity))
        }
        // LZ4_compress_default only fails when the output is too small, which
        // the bound rules out; an empty input compresses to nothing.
        precondition(written >= 0, "LZ4_compress_default failed with a bound-sized buffer")
        output.removeLast(capacity - Int(written))
        return Int(written)
    }

    /// Decompresses `input` into exactly `rawCount` bytes, or returns nil when
    /// the input is malformed or decompresses to another length. liblz4's
    /// `_safe` decoder never reads or writes out of bounds on bad input.
    package static func decompress(_ input: UnsafeRawBufferPointer, rawCount: Int) -> [UInt8]? {
        guard rawCount >= 0, rawCount <= Int(Int32.max) else { return nil }
        var ok = false
        let result = [UInt8](unsafeUninitializedCapacity: rawCount) { buffer, initialized in
            ok = decompress(input, into: UnsafeMutableRawBufferPointer(buffer))
            initialized = ok ? rawCount : 0
        }
        return ok ? result : nil
    }

    /// Decompresses `input` into exactly all of `output`; false when the input
    /// is malformed or decompresses to another length.
    package static func decompress(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) -> Bool {
        if output.isEmpty { return input.isEmpty }
        guard let src = input.baseAddress, let dst = output.baseAddress, output.count <= Int(Int32.max) else { return false }
        let n = LZ4_decompress_safe(src.assumingMemoryBound(to: CChar.self), dst.assumingMemoryBound(to: CChar.self),
                                    Int32(clamping: input.count), Int32(output.count))
        return n == Int32(output.count)
    }
}
