//! Byte counts as text for notes and reports.

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Formats bytes with the largest binary unit that divides them, else in bytes.
pub fn format_size(bytes: u64) -> String {
    for (unit, scale) in [("GiB", GIB), ("MiB", MIB), ("KiB", KIB)] {
        if bytes >= scale && bytes.is_multiple_of(scale) {
            return format!("{}{unit}", bytes / scale);
        }
    }
    format!("{bytes}B")
}

/// Bytes as a rounded figure with a binary unit, for people (e.g. 187.3MiB).
pub fn human_size(bytes: u64) -> String {
    for (unit, scale) in [("GiB", GIB), ("MiB", MIB), ("KiB", KIB)] {
        if bytes >= scale {
            return format!("{:.1}{unit}", bytes as f64 / scale as f64);
        }
    }
    format!("{bytes}B")
}
