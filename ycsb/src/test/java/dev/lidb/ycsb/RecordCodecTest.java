package dev.lidb.ycsb;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

class RecordCodecTest {
  private static Map<String, byte[]> randomRecord(Random rng) {
    Map<String, byte[]> record = new HashMap<>();
    int fields = rng.nextInt(12);
    for (int f = 0; f < fields; f++) {
      byte[] value = new byte[rng.nextInt(200)];
      rng.nextBytes(value);
      record.put("field" + rng.nextInt(20), value);
    }
    return record;
  }

  private static void assertSameRecord(Map<String, byte[]> want, Map<String, byte[]> got) {
    assertEquals(want.keySet(), got.keySet());
    for (String name : want.keySet()) {
      assertArrayEquals(want.get(name), got.get(name), name);
    }
  }

  @Test
  void roundTripsRandomRecords() {
    long seed = 20261123L;
    Random rng = new Random(seed);
    for (int i = 0; i < 1000; i++) {
      Map<String, byte[]> record = randomRecord(rng);
      byte[] bytes = RecordCodec.encode(record);
      assertSameRecord(record, RecordCodec.decode(bytes, null));
    }
  }

  @Test
  void keepsOnlyTheWantedFields() {
    Map<String, byte[]> record = new HashMap<>();
    record.put("field0", "a".getBytes(StandardCharsets.UTF_8));
    record.put("field1", new byte[0]);
    record.put("field2", "ccc".getBytes(StandardCharsets.UTF_8));
    Map<String, byte[]> got =
        RecordCodec.decode(RecordCodec.encode(record), Set.of("field1", "field2", "absent"));
    assertEquals(Set.of("field1", "field2"), got.keySet());
    assertArrayEquals(new byte[0], got.get("field1"));
  }

  @Test
  void theLayoutIsTheDocumentedOne() {
    Map<String, byte[]> record = new HashMap<>();
    record.put("b", new byte[] {9});
    record.put("a", new byte[0]);
    byte[] want = {2, 0, 0, 0, 1, 0, 0, 0, 'a', 0, 0, 0, 0, 1, 0, 0, 0, 'b', 1, 0, 0, 0, 9};
    assertArrayEquals(want, RecordCodec.encode(record));
  }

  @Test
  void rejectsEveryTruncationAndTrailingBytes() {
    Random rng = new Random(7);
    for (int i = 0; i < 100; i++) {
      byte[] bytes = RecordCodec.encode(randomRecord(rng));
      for (int cut = 0; cut < bytes.length; cut++) {
        byte[] shorter = Arrays.copyOf(bytes, cut);
        assertThrows(IllegalArgumentException.class, () -> RecordCodec.decode(shorter, null));
      }
      byte[] longer = Arrays.copyOf(bytes, bytes.length + 1);
      assertThrows(IllegalArgumentException.class, () -> RecordCodec.decode(longer, null));
    }
  }

  @Test
  void randomBytesNeverThrowAnythingElse() {
    Random rng = new Random(11);
    for (int i = 0; i < 10000; i++) {
      byte[] bytes = new byte[rng.nextInt(40)];
      rng.nextBytes(bytes);
      if (rng.nextBoolean() && bytes.length >= 4) {
        bytes[1] = 0;
        bytes[2] = 0;
        bytes[3] = 0;
      }
      try {
        RecordCodec.decode(bytes, null);
      } catch (IllegalArgumentException expected) {
        // a malformed record is rejected; nothing else may escape
      }
    }
  }

  @Test
  void rejectsDuplicateFields() {
    byte[] dup = {2, 0, 0, 0, 1, 0, 0, 0, 'a', 0, 0, 0, 0, 1, 0, 0, 0, 'a', 0, 0, 0, 0};
    assertThrows(IllegalArgumentException.class, () -> RecordCodec.decode(dup, null));
  }
}
