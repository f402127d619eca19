//! Byte sizes as people write them, for every option and spec that takes one (`lidb`'s options,
//! the benchmarks' and the fault specs of `lidb stress --faults`): a whole number with an optional
//! KiB/MiB/GiB suffix (also K, M, G, KB, MB, GB, all binary, any case, an optional space before
//! it), e.g. `64MiB`, `512K`, `4096`; and the same sizes written back (`format_size` exactly,
//! `human_size` rounded for people). Pure functions, callable from any thread.

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

/// Parses a size; the error names the text and the accepted forms.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => {
            return Err(format!(
                "\"{text}\" is not a size (use e.g. 4096, 512KiB, 64MiB, 1GiB)"
            ));
        }
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("\"{text}\" is not a size (use e.g. 4096, 512KiB, 64MiB, 1GiB)"))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("size \"{text}\" is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_with_and_without_suffixes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("512K"), Ok(512 << 10));
        assert_eq!(parse_size("1gb"), Ok(1 << 30));
        assert!(parse_size("12XB").is_err());
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("99999999999GiB").is_err());
        assert_eq!(parse_size("64 MiB"), Ok(64 << 20));
        assert_eq!(parse_size("3b"), Ok(3));
        assert!(parse_size("").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("1.5MiB").is_err());
        assert_eq!(parse_size("4 mib"), Ok(4 << 20));
        // MB is binary too: one parser for every option, so `64MB` means what `64MiB` does.
        assert_eq!(parse_size("64MB"), Ok(64 << 20));
    }

    #[test]
    fn formatted_sizes_parse_back() {
        for bytes in [0, 1, 4096, 64 << 20, 3 << 30, (1 << 30) + 1] {
            assert_eq!(parse_size(&format_size(bytes)), Ok(bytes));
        }
        assert_eq!(human_size(1536), "1.5KiB");
    }
}
