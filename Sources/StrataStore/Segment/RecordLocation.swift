/// Where a record sits in a segment, packed into the 32-bit `block` field of
/// an ``IndexEntry``: the block's index in the upper 20 bits, the record's slot
/// in the block in the lower 12. A get then goes straight to the record
/// instead of binary-searching a 32 KiB block (about eight cache misses).
///
/// Hence the limits: at most 4,096 records per block (``SegmentWriter`` cuts
/// blocks there) and 1,048,576 blocks per segment (``StoreOptions`` caps the
/// sizes that decide how large a segment gets).
package struct RecordLocation: Hashable, Sendable {
    package static let slotBits: UInt32 = 12
    package static let maximumSlots = 1 << 12
    package static let maximumBlocks = 1 << 20

    package var block: UInt32
    package var slot: UInt32

    package init(block: UInt32, slot: UInt32) {
        self.block = block
        self.slot = slot
    }

    @inline(__always)
    package init(packed: UInt32) {
        block = packed >> Self.slotBits
        slot = packed & ((1 << Self.slotBits) - 1)
    }

    @inline(__always)
    package var packed: UInt32 { block << Self.slotBits | slot }
}
