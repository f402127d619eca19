package dev.lidb.ycsb;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * The byte format of one YCSB record (a map from field name to value) stored as ONE lidb value.
 *
 * <p>Format, all integers unsigned 32-bit little-endian, as in every lidb
 * format (docs/format/ycsb-record.md draws it):
 *
 * <pre>
 *   record := field_count:u32  field{field_count}
 *   field  := name_len:u32  name:u8[name_len] (UTF-8)  value_len:u32  value:u8[value_len]
 * </pre>
 *
 * <p>Invariants: fields are written in ascending name order (the encoding of a map is
 * deterministic); the encoding ends exactly after the last field. {@link #decode} rejects any
 * byte string that breaks the format (short, trailing bytes, a length past the end, a duplicate
 * name) with {@link IllegalArgumentException}, never another exception; a record is untrusted
 * input, as anything may have written the key through the Redis protocol.
 *
 * <p>Stateless; safe to call from any thread.
 */
public final class RecordCodec {
  private RecordCodec() {}

  /** Encodes {@code fields} (names and values as bytes). */
  public static byte[] encode(Map<String, byte[]> fields) {
    TreeMap<String, byte[]> sorted = new TreeMap<>(fields);
    long size = 4;
    for (Map.Entry<String, byte[]> e : sorted.entrySet()) {
      size += 4L + e.getKey().getBytes(StandardCharsets.UTF_8).length + 4L + e.getValue().length;
    }
    if (size > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("record of " + size + " bytes is too large");
    }
    ByteBuffer out = ByteBuffer.allocate((int) size).order(ByteOrder.LITTLE_ENDIAN);
    out.putInt(sorted.size());
    for (Map.Entry<String, byte[]> e : sorted.entrySet()) {
      byte[] name = e.getKey().getBytes(StandardCharsets.UTF_8);
      out.putInt(name.length).put(name);
      out.putInt(e.getValue().length).put(e.getValue());
    }
    return out.array();
  }

  /**
   * Decodes a record; keeps only the fields named in {@code wanted}, or every field when it is
   * null (YCSB's "all fields").
   */
  public static Map<String, byte[]> decode(byte[] bytes, Set<String> wanted) {
    ByteBuffer in = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
    long count = readLength(in, "field count");
    TreeMap<String, byte[]> fields = new TreeMap<>();
    HashSet<String> names = new HashSet<>();
    for (long i = 0; i < count; i++) {
      String name = new String(readBytes(in, "field name"), StandardCharsets.UTF_8);
      byte[] value = readBytes(in, "field value");
      if (!names.add(name)) {
        throw new IllegalArgumentException("duplicate field '" + name + "'");
      }
      if (wanted == null || wanted.contains(name)) {
        fields.put(name, value);
      }
    }
    if (in.hasRemaining()) {
      throw new IllegalArgumentException(in.remaining() + " trailing bytes after the last field");
    }
    return fields;
  }

  private static long readLength(ByteBuffer in, String what) {
    if (in.remaining() < 4) {
      throw new IllegalArgumentException("record ends inside the " + what);
    }
    return Integer.toUnsignedLong(in.getInt());
  }

  private static byte[] readBytes(ByteBuffer in, String what) {
    long len = readLength(in, what + " length");
    if (len > in.remaining()) {
      throw new IllegalArgumentException(
          what + " of " + len + " bytes runs past the end (" + in.remaining() + " left)");
    }
    byte[] out = new byte[(int) len];
    in.get(out);
    return out;
  }
}
