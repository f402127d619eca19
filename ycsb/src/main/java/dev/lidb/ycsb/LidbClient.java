package dev.lidb.ycsb;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.exceptions.JedisException;
import site.ycsb.ByteArrayByteIterator;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;

/**
 * lidb's YCSB DB binding: talks to {@code lidb serve} over the Redis protocol through Jedis.
 *
 * <p>Each YCSB record is ONE lidb value under the record's key, its fields encoded by {@link
 * RecordCodec}. The YCSB table name is ignored (lidb has one key space), as in YCSB's own Redis
 * binding. Operations:
 *
 * <ul>
 *   <li>read: GET, then decode and keep the requested fields; a missing key is NOT_FOUND.
 *   <li>insert: SET of the encoded record (it replaces any record under the key).
 *   <li>update: GET, merge the new fields into the record, SET. This read-modify-write is NOT
 *       atomic across clients: two clients updating different fields of one record at once may
 *       lose one update (lidb serve has no per-field or compare-and-set command). YCSB's core
 *       workloads only check that operations succeed, not field-level isolation. A missing key is
 *       NOT_FOUND.
 *   <li>delete: DEL; NOT_FOUND when nothing was deleted.
 *   <li>scan: {@code LIDB.RANGE [startkey + LIMIT recordcount WITHVALUES}: the first recordcount
 *       keys at or after startkey in byte order, each record decoded.
 * </ul>
 *
 * <p>Properties: {@code lidb.host} (default 127.0.0.1), {@code lidb.port} (default 6379), {@code
 * lidb.timeout} (socket timeout in ms, default 10000).
 *
 * <p>Threads: YCSB creates one instance per client thread and calls it from that thread only;
 * each instance owns one connection. A Redis error reply, a dropped connection or a record that
 * does not decode is Status.ERROR.
 */
public class LidbClient extends DB {
  public static final String HOST_PROPERTY = "lidb.host";
  public static final String PORT_PROPERTY = "lidb.port";
  public static final String TIMEOUT_PROPERTY = "lidb.timeout";

  private static final byte[] LIMIT = bytes("LIMIT");
  private static final byte[] WITHVALUES = bytes("WITHVALUES");
  private static final byte[] NO_UPPER_BOUND = bytes("+");

  private Jedis jedis;

  @Override
  public void init() throws DBException {
    Properties props = getProperties();
    String host = props.getProperty(HOST_PROPERTY, "127.0.0.1");
    int port;
    int timeoutMs;
    try {
      port = Integer.parseInt(props.getProperty(PORT_PROPERTY, "6379"));
      timeoutMs = Integer.parseInt(props.getProperty(TIMEOUT_PROPERTY, "10000"));
    } catch (NumberFormatException e) {
      throw new DBException("lidb.port and lidb.timeout must be integers: " + e.getMessage());
    }
    try {
      jedis = new Jedis(host, port, timeoutMs);
      jedis.ping();
    } catch (JedisException e) {
      throw new DBException("cannot reach lidb serve at " + host + ":" + port + ": " + e, e);
    }
  }

  @Override
  public void cleanup() throws DBException {
    if (jedis != null) {
      try {
        jedis.close();
      } catch (JedisException e) {
        throw new DBException("closing the connection: " + e, e);
      } finally {
        jedis = null;
      }
    }
  }

  @Override
  public Status read(String table, String key, Set<String> fields, Map<String, ByteIterator> result) {
    try {
      byte[] record = jedis.get(bytes(key));
      if (record == null) {
        return Status.NOT_FOUND;
      }
      putAll(RecordCodec.decode(record, fields), result);
      return Status.OK;
    } catch (JedisException | IllegalArgumentException e) {
      return error("read", key, e);
    }
  }

  @Override
  public Status scan(
      String table,
      String startkey,
      int recordcount,
      Set<String> fields,
      Vector<HashMap<String, ByteIterator>> result) {
    try {
      Object reply =
          jedis.sendCommand(
              LidbRangeCommand.RANGE,
              bytes("[" + startkey),
              NO_UPPER_BOUND,
              LIMIT,
              bytes(Integer.toString(recordcount)),
              WITHVALUES);
      List<?> items = rangeItems(reply);
      for (int i = 0; i + 1 < items.size(); i += 2) {
        HashMap<String, ByteIterator> row = new HashMap<>();
        putAll(RecordCodec.decode((byte[]) items.get(i + 1), fields), row);
        result.add(row);
      }
      return Status.OK;
    } catch (JedisException | IllegalArgumentException | ClassCastException e) {
      return error("scan", startkey, e);
    }
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    try {
      byte[] old = jedis.get(bytes(key));
      if (old == null) {
        return Status.NOT_FOUND;
      }
      Map<String, byte[]> record = RecordCodec.decode(old, null);
      for (Map.Entry<String, ByteIterator> e : values.entrySet()) {
        record.put(e.getKey(), e.getValue().toArray());
      }
      jedis.set(bytes(key), RecordCodec.encode(record));
      return Status.OK;
    } catch (JedisException | IllegalArgumentException e) {
      return error("update", key, e);
    }
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    try {
      Map<String, byte[]> record = new HashMap<>();
      for (Map.Entry<String, ByteIterator> e : values.entrySet()) {
        record.put(e.getKey(), e.getValue().toArray());
      }
      jedis.set(bytes(key), RecordCodec.encode(record));
      return Status.OK;
    } catch (JedisException | IllegalArgumentException e) {
      return error("insert", key, e);
    }
  }

  @Override
  public Status delete(String table, String key) {
    try {
      return jedis.del(bytes(key)) == 0 ? Status.NOT_FOUND : Status.OK;
    } catch (JedisException e) {
      return error("delete", key, e);
    }
  }

  /** The items array of a {@code [next_key, items]} reply, checked to hold key-value pairs. */
  private static List<?> rangeItems(Object reply) {
    if (!(reply instanceof List<?> top) || top.size() != 2 || !(top.get(1) instanceof List<?>)) {
      throw new IllegalArgumentException("LIDB.RANGE reply is not [next_key, items]");
    }
    List<?> items = (List<?>) top.get(1);
    if (items.size() % 2 != 0) {
      throw new IllegalArgumentException("LIDB.RANGE WITHVALUES reply has an odd item count");
    }
    return items;
  }

  private static void putAll(Map<String, byte[]> fields, Map<String, ByteIterator> out) {
    for (Map.Entry<String, byte[]> e : fields.entrySet()) {
      out.put(e.getKey(), new ByteArrayByteIterator(e.getValue()));
    }
  }

  private static Status error(String op, String key, Exception e) {
    System.err.println("lidb " + op + " " + key + ": " + e);
    return Status.ERROR;
  }

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}
