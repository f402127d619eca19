//! Byte sizes on the command line: a whole number with an optional KiB/MiB/GiB suffix (also K, M,
//! G, KB, MB, GB, all binary), e.g. `64MiB`, `512K`, `4096`.

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
    use super::parse_size;

    #[test]
    fn sizes_with_and_without_suffixes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("512K"), Ok(512 << 10));
        assert_eq!(parse_size("1gb"), Ok(1 << 30));
        assert!(parse_size("12XB").is_err());
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("99999999999GiB").is_err());
    }
}
