package dev.lidb.ycsb;

import java.nio.charset.StandardCharsets;
import redis.clients.jedis.commands.ProtocolCommand;

/**
 * lidb's own ordered range command, sent through Jedis' {@code sendCommand}:
 *
 * <pre>
 *   LIDB.RANGE start end [LIMIT n] [WITHVALUES] [REV]  ->  [next_key, items]
 * </pre>
 *
 * <p>{@code start} and {@code end} are in ZRANGEBYLEX notation ({@code [key} inclusive, {@code
 * (key} exclusive, {@code -} and {@code +} unbounded); with WITHVALUES, items are key, value, key,
 * value, ...; next_key is the first key not returned, or nil. The README's "Serving over the Redis
 * protocol" section is the reference.
 */
enum LidbRangeCommand implements ProtocolCommand {
  RANGE("LIDB.RANGE");

  private final byte[] raw;

  LidbRangeCommand(String name) {
    this.raw = name.getBytes(StandardCharsets.US_ASCII);
  }

  @Override
  public byte[] getRaw() {
    return raw;
  }
}
