// Compatibility-matrix client for JDBC drivers (contract: see
// tests/matrix/README.md): `java Matrix mysql` runs MySQL Connector/J with
// server-side prepared statements (useServerPrepStmts=true) and cursors
// (useCursorFetch=true); `java Matrix mariadb` runs MariaDB Connector/J
// (which prepares server-side when asked with useServerPrepStmts=true).
// One JSON line per check on stdout.

import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.sql.*;
import java.util.*;

public class Matrix {
    interface Check {
        Object run() throws Exception;
    }

    static final class Skip extends Exception {
        Skip(String why) {
            super(why);
        }
    }

    static String driver;
    static String prefix;
    static final Map<String, String> env = System.getenv();

    public static void main(String[] args) throws Exception {
        driver = args.length > 0 ? args[0] : "";
        if (!driver.equals("mysql") && !driver.equals("mariadb")) {
            System.err.println("usage: java Matrix mysql|mariadb");
            System.exit(64);
        }
        prefix = driver.equals("mysql") ? "connj" : "mariadbj";
        Connection conn;
        try {
            conn = connect("");
        } catch (SQLException e) {
            emit("connect", "error", e.toString());
            return;
        }
        try (Connection c = conn; Connection other = connect("")) {
            check("connect", () -> query(c, "SELECT 1 AS one"));
            check("tls", Matrix::tls);
            check("types_text", () -> typesText(c));
            check("types_prepared", () -> typesPrepared(c));
            check("transactions", () -> transactions(c, other));
            check("errors", () -> errors(c));
            check("procedure", () -> procedure(c));
            check("multi_statement", Matrix::multiStatement);
            check("large_result", () -> largeResult(c));
            check("last_insert_id", () -> lastInsertId(c));
            check("switch_database", () -> switchDatabase(c));
            check("pool_reset_ping", Matrix::poolResetPing);
            check("cursor", Matrix::cursor);
            check("procedure_out_params", () -> procedureOutParams(c));
            check("prepared_exact_types", () -> preparedExactTypes(c));
        }
    }

    // ---- plumbing -------------------------------------------------------

    static String url(String extra) {
        String scheme = driver.equals("mysql") ? "jdbc:mysql://" : "jdbc:mariadb://";
        StringBuilder u = new StringBuilder(scheme + env.get("MQ_HOST") + ":" + env.get("MQ_PORT") + "/"
                + env.get("MQ_DATABASE") + "?");
        if (driver.equals("mysql")) {
            // caching_sha2_password full authentication over plain TCP
            // needs the server's RSA key.
            u.append("useServerPrepStmts=true&allowPublicKeyRetrieval=true&sslMode=DISABLED");
        } else {
            u.append("useServerPrepStmts=true&allowPublicKeyRetrieval=true");
        }
        if (!extra.isEmpty()) u.append("&").append(extra);
        return u.toString();
    }

    static Connection connect(String extra) throws SQLException {
        return DriverManager.getConnection(url(extra), env.get("MQ_USER"), env.get("MQ_PASSWORD"));
    }

    static void check(String name, Check f) {
        long start = System.nanoTime();
        try {
            emit(name, "answer", f.run());
        } catch (Skip s) {
            emit(name, "skip", s.getMessage());
        } catch (Throwable t) {
            emit(name, "error", t.toString());
        }
        System.err.println(name + ": " + (System.nanoTime() - start) / 1_000_000 + " ms");
    }

    static void emit(String name, String kind, Object value) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("check", name);
        line.put(kind, value);
        System.out.println(Json.write(line));
    }

    static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        return m;
    }

    static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) s.append(String.format("%02x", x));
        return s.toString();
    }

    /** A value as the driver returned it from getObject, with its class. */
    static Object value(Object v) {
        if (v == null) return null;
        String type = v.getClass().getSimpleName();
        if (v instanceof byte[]) return type + ":" + hex((byte[]) v);
        return type + ":" + v;
    }

    static List<Object> columns(ResultSetMetaData md) throws SQLException {
        List<Object> cols = new ArrayList<>();
        for (int i = 1; i <= md.getColumnCount(); i++) {
            cols.add(map("label", md.getColumnLabel(i), "name", md.getColumnName(i), "table", md.getTableName(i),
                    "type", md.getColumnType(i), "typeName", md.getColumnTypeName(i), "class", md.getColumnClassName(i),
                    "precision", md.getPrecision(i), "scale", md.getScale(i), "displaySize", md.getColumnDisplaySize(i),
                    "nullable", md.isNullable(i), "signed", md.isSigned(i), "autoIncrement", md.isAutoIncrement(i)));
        }
        return cols;
    }

    static Map<String, Object> resultSet(ResultSet rs) throws SQLException {
        ResultSetMetaData md = rs.getMetaData();
        List<Object> rows = new ArrayList<>();
        while (rs.next()) {
            List<Object> row = new ArrayList<>();
            for (int i = 1; i <= md.getColumnCount(); i++) {
                // getObject and getString: the driver's typed value and its
                // text rendering.
                Object typed;
                try {
                    typed = value(rs.getObject(i));
                } catch (SQLException e) {
                    // e.g. Connector/J refuses a negative TIME as java.sql.Time.
                    typed = "getObject failed: " + e.getMessage();
                }
                row.add(List.of(Objects.toString(typed), Objects.toString(rs.getString(i))));
            }
            rows.add(row);
        }
        return map("columns", columns(md), "rows", rows);
    }

    /** Every result of an executed statement: result sets and update counts. */
    static List<Object> results(Statement st, boolean isResultSet) throws SQLException {
        List<Object> out = new ArrayList<>();
        while (true) {
            if (isResultSet) {
                try (ResultSet rs = st.getResultSet()) {
                    out.add(resultSet(rs));
                }
            } else {
                int n = st.getUpdateCount();
                if (n == -1) break;
                out.add(map("updateCount", n));
            }
            isResultSet = st.getMoreResults();
        }
        return out;
    }

    static List<Object> query(Connection c, String sql) throws SQLException {
        try (Statement st = c.createStatement()) {
            return results(st, st.execute(sql));
        }
    }

    static void exec(Connection c, String... sqls) throws SQLException {
        try (Statement st = c.createStatement()) {
            for (String s : sqls) st.execute(s);
        }
    }

    static Object sqlError(SQLException e) {
        // MariaDB Connector/J prefixes the connection id, which differs
        // between servers.
        String message = e.getMessage().replaceFirst("^\\(conn=\\d+\\) ", "(conn=…) ");
        return map("errno", e.getErrorCode(), "sqlstate", e.getSQLState(), "message", message);
    }

    interface Action {
        void run() throws SQLException;
    }

    static Object expectError(Action a) {
        try {
            a.run();
            return "no error";
        } catch (SQLException e) {
            return sqlError(e);
        }
    }

    static long count(Connection c, String table) throws SQLException {
        try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SELECT COUNT(*) FROM " + table)) {
            rs.next();
            return rs.getLong(1);
        }
    }

    // ---- checks ---------------------------------------------------------

    static final String EMOJI = "héllo wörld 🐬🚀 日本";

    static String typesTable(String t) {
        return "CREATE TABLE " + t + " (id INT PRIMARY KEY,"
                + " ti TINYINT, si SMALLINT, mi MEDIUMINT, i INT, bi BIGINT,"
                + " tiu TINYINT UNSIGNED, siu SMALLINT UNSIGNED, miu MEDIUMINT UNSIGNED, iu INT UNSIGNED, biu BIGINT UNSIGNED,"
                + " de DECIMAL(65,30), f FLOAT, d DOUBLE,"
                + " dt DATE, dtm DATETIME(6), ts TIMESTAMP(6) NULL, tm TIME, yr YEAR,"
                + " c CHAR(10), vc VARCHAR(100), tx TEXT,"
                + " bn BINARY(16), vb VARBINARY(300), bl BLOB,"
                + " js JSON, en ENUM('a','b','c'), st SET('x','y','z'), bt BIT(64)) CHARACTER SET utf8mb4";
    }

    static byte[] allBytes() {
        byte[] b = new byte[256];
        for (int i = 0; i < 256; i++) b[i] = (byte) i;
        return b;
    }

    static byte[] reversed() {
        byte[] b = new byte[256];
        for (int i = 0; i < 256; i++) b[i] = (byte) (255 - i);
        return b;
    }

    static Object typesText(Connection c) throws SQLException {
        String t = prefix + "_types_text";
        exec(c, "DROP TABLE IF EXISTS " + t, typesTable(t),
                "INSERT INTO " + t + " VALUES (1, -128, -32768, -8388608, -2147483648, -9223372036854775808,"
                        + " 0, 0, 0, 0, 0,"
                        + " '-12345678901234567890123456789012345.123456789012345678901234567890', -3.5, -1.7976931348623157e308,"
                        + " '1000-01-01', '1000-01-01 00:00:00.000000', '1970-01-02 00:00:01.000001', '-838:59:59', 1901,"
                        + " 'a', '" + EMOJI + "', '" + EMOJI.repeat(50) + "',"
                        + " X'000102030405060708090a0b0c0d0e0f', X'" + hex(allBytes()) + "', X'" + hex(allBytes()) + "',"
                        + " '{\"a\": [1, 2, {\"b\": null}], \"e\": \"🐬\"}', 'a', 'x,z', b'0')",
                "INSERT INTO " + t + " VALUES (2, 127, 32767, 8388607, 2147483647, 9223372036854775807,"
                        + " 255, 65535, 16777215, 4294967295, 18446744073709551615,"
                        + " '12345678901234567890123456789012345.123456789012345678901234567890', 3.14159, 2.718281828459045,"
                        + " '9999-12-31', '9999-12-31 23:59:59.999999', '2030-06-15 12:34:56.789012', '838:59:59', 2155,"
                        + " 'zz 🐬', '🐬', '',"
                        + " X'ffffffffffffffffffffffffffffffff', X'" + hex(reversed()) + "', X'',"
                        + " '[]', 'c', 'x,y,z', b'1111111111111111111111111111111111111111111111111111111111111111')",
                "INSERT INTO " + t + " (id) VALUES (3)");
        return query(c, "SELECT * FROM " + t + " ORDER BY id");
    }

    // DATETIME values are bound as LocalDateTime: a java.sql.Timestamp goes
    // out as MYSQL_TYPE_TIMESTAMP, which MariaDB stores as NULL outside
    // TIMESTAMP's range (1970-2038) while the sidecar's literal keeps it.
    static Object typesPrepared(Connection c) throws SQLException {
        String t = prefix + "_types_prepared";
        exec(c, "DROP TABLE IF EXISTS " + t, typesTable(t));
        List<Object> affected = new ArrayList<>();
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + t + " VALUES (?" + ", ?".repeat(28) + ")")) {
            Object[][] rows = {
                {1, (byte) -128, (short) -32768, -8388608, -2147483648, Long.MIN_VALUE,
                    (short) 0, 0, 0, 0L, new BigDecimal("0"),
                    new BigDecimal("-12345678901234567890123456789012345.123456789012345678901234567890"), -3.5f, -1.7976931348623157e308,
                    java.sql.Date.valueOf("1000-01-01"), java.time.LocalDateTime.parse("1000-01-01T00:00:00"),
                    Timestamp.valueOf("1970-01-02 00:00:01.000001"), "-838:59:59", (short) 1901,
                    "a", EMOJI, EMOJI.repeat(50),
                    Arrays.copyOf(allBytes(), 16), allBytes(), allBytes(),
                    "{\"a\": [1, 2, {\"b\": null}], \"e\": \"🐬\"}", "a", "x,z", new byte[8]},
                {2, (byte) 127, (short) 32767, 8388607, 2147483647, Long.MAX_VALUE,
                    (short) 255, 65535, 16777215, 4294967295L, new BigDecimal("18446744073709551615"),
                    new BigDecimal("12345678901234567890123456789012345.123456789012345678901234567890"), 3.14159f, 2.718281828459045,
                    java.sql.Date.valueOf("9999-12-31"), java.time.LocalDateTime.parse("9999-12-31T23:59:59.999999"),
                    Timestamp.valueOf("2030-06-15 12:34:56.789012"), Time.valueOf("23:59:59"), (short) 2155,
                    "zz 🐬", "🐬", "",
                    new byte[] {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}, reversed(), new byte[0],
                    "[]", "c", "x,y,z", new byte[] {-1, -1, -1, -1, -1, -1, -1, -1}},
            };
            for (Object[] row : rows) {
                for (int i = 0; i < row.length; i++) ps.setObject(i + 1, row[i]);
                affected.add(ps.executeUpdate());
            }
            ps.setInt(1, 3);
            for (int i = 2; i <= 29; i++) ps.setNull(i, Types.NULL);
            affected.add(ps.executeUpdate());
        }
        Object select;
        try (PreparedStatement ps = c.prepareStatement("SELECT * FROM " + t + " WHERE id > ? ORDER BY id")) {
            ps.setInt(1, 0);
            try (ResultSet rs = ps.executeQuery()) {
                select = resultSet(rs);
            }
        }
        // Parameter values echoed back (a bare `?`'s column type differs
        // by design through the sidecar: psdb binds become SQL literals).
        List<Object> echo = new ArrayList<>();
        try (PreparedStatement ps = c.prepareStatement("SELECT ? AS p1, ? AS p2, ? AS p3, ? AS p4, ? AS p5, ? AS p6, ? AS p7")) {
            ps.setLong(1, -1);
            ps.setDouble(2, 1.5);
            ps.setString(3, "🐬");
            ps.setBytes(4, new byte[] {0, -1});
            ps.setNull(5, Types.VARCHAR);
            ps.setBoolean(6, true);
            ps.setBigDecimal(7, new BigDecimal("-1.50"));
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                for (int i = 1; i <= 7; i++) echo.add(rs.getString(i));
            }
        }
        return map("affected", affected, "select", select, "echo", echo);
    }

    static Object transactions(Connection c, Connection other) throws SQLException {
        String t = prefix + "_tx";
        exec(c, "DROP TABLE IF EXISTS " + t, "CREATE TABLE " + t + " (id INT PRIMARY KEY, v VARCHAR(10))");
        Map<String, Object> out = new LinkedHashMap<>();
        c.setAutoCommit(false);
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + t + " VALUES (?, ?)")) {
            ps.setInt(1, 1);
            ps.setString(2, "commit");
            ps.executeUpdate();
            out.put("other_before_commit", count(other, t));
            c.commit();
            out.put("other_after_commit", count(other, t));
            ps.setInt(1, 2);
            ps.setString(2, "rollback");
            ps.executeUpdate();
            out.put("inside_rollback", count(c, t));
            c.rollback();
            out.put("after_rollback", count(other, t));
        } finally {
            c.setAutoCommit(true);
        }
        exec(c, "BEGIN", "INSERT INTO " + t + " VALUES (3, 'sql')", "COMMIT");
        out.put("after_sql_begin_commit", count(other, t));
        return out;
    }

    static Object errors(Connection c) throws SQLException {
        String t = prefix + "_errors";
        exec(c, "DROP TABLE IF EXISTS " + t, "CREATE TABLE " + t + " (id INT PRIMARY KEY)", "INSERT INTO " + t + " VALUES (1)");
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("duplicate_text", expectError(() -> exec(c, "INSERT INTO " + t + " VALUES (1)")));
        out.put("duplicate_prepared", expectError(() -> {
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + t + " VALUES (?)")) {
                ps.setInt(1, 1);
                ps.executeUpdate();
            }
        }));
        out.put("syntax", expectError(() -> exec(c, "SELEC 1")));
        out.put("unknown_table", expectError(() -> {
            try (PreparedStatement ps = c.prepareStatement("SELECT * FROM " + prefix + "_no_such_table WHERE id = ?")) {
                ps.setInt(1, 1);
                ps.executeQuery().close();
            }
        }));
        out.put("still_works", count(c, t));
        return out;
    }

    static Object procedure(Connection c) throws SQLException {
        String p = prefix + "_proc";
        exec(c, "DROP PROCEDURE IF EXISTS " + p,
                "CREATE PROCEDURE " + p + "(IN n INT) BEGIN SELECT n AS n, 'first' AS which;"
                        + " SELECT n * 2 AS doubled, 'second' AS which UNION ALL SELECT n * 3, 'third'; END");
        try (CallableStatement cs = c.prepareCall("{call " + p + "(?)}")) {
            cs.setInt(1, 7);
            return results(cs, cs.execute());
        }
    }

    // OUT and INOUT parameters of a CallableStatement: MariaDB Connector/J
    // prepares the CALL server-side and reads them from the result set
    // flagged SERVER_PS_OUT_PARAMS (MySQL Connector/J reads them back
    // through user variables).
    static Object procedureOutParams(Connection c) throws SQLException {
        String p = prefix + "_proc_out";
        exec(c, "DROP PROCEDURE IF EXISTS " + p,
                "CREATE PROCEDURE " + p + "(IN a INT, INOUT b VARCHAR(20), OUT c DECIMAL(10,2),"
                        + " OUT d DATETIME(6), OUT f FLOAT, OUT g DOUBLE) BEGIN SELECT a AS a_in;"
                        + " SET b = CONCAT(b, '!'); SET c = a / 4; SET d = '2024-02-29 13:14:15.5';"
                        + " SET f = 1.2345678; SET g = 1e300 / 7; END");
        try (CallableStatement cs = c.prepareCall("{call " + p + "(?, ?, ?, ?, ?, ?)}")) {
            cs.setInt(1, 7);
            cs.setString(2, "hi");
            cs.registerOutParameter(2, Types.VARCHAR);
            cs.registerOutParameter(3, Types.DECIMAL);
            cs.registerOutParameter(4, Types.TIMESTAMP);
            cs.registerOutParameter(5, Types.REAL);
            cs.registerOutParameter(6, Types.DOUBLE);
            Object results = results(cs, cs.execute());
            return map("results", results, "b", cs.getString(2), "c", String.valueOf(cs.getBigDecimal(3)),
                    "d", String.valueOf(cs.getTimestamp(4)), "f", cs.getFloat(5), "g", cs.getDouble(6));
        }
    }

    // A FLOAT column read in the binary protocol, FLOAT and DOUBLE
    // parameters, and temporal parameters with fractions echoed and
    // stored: the values and the column types the server gives them.
    static Object preparedExactTypes(Connection c) throws SQLException {
        String t = prefix + "_exact";
        exec(c, "DROP TABLE IF EXISTS " + t,
                "CREATE TABLE " + t + " (id INT PRIMARY KEY, f FLOAT, d DOUBLE, dt DATETIME(6), tm TIME(6))",
                "INSERT INTO " + t + " VALUES (1, 1.2345678, 0.1, NULL, NULL)");
        Map<String, Object> out = new LinkedHashMap<>();
        try (PreparedStatement ps = c.prepareStatement("SELECT f, d FROM " + t + " WHERE id = ?")) {
            ps.setInt(1, 1);
            try (ResultSet rs = ps.executeQuery()) {
                out.put("float_column", resultSet(rs));
            }
        }
        try (PreparedStatement ps = c.prepareStatement("SELECT ? AS f, ? AS d, ? AS dt, ? AS tm")) {
            ps.setFloat(1, 9.876543f);
            ps.setDouble(2, 1.0 / 3.0);
            ps.setObject(3, java.time.LocalDateTime.parse("2024-02-29T13:14:15.123456"));
            ps.setObject(4, java.time.LocalTime.parse("23:59:59.5"));
            try (ResultSet rs = ps.executeQuery()) {
                out.put("echo", resultSet(rs));
            }
        }
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + t + " VALUES (?, ?, ?, ?, ?)")) {
            ps.setInt(1, 2);
            ps.setFloat(2, 9.876543f);
            ps.setDouble(3, 1.0 / 3.0);
            ps.setObject(4, java.time.LocalDateTime.parse("1000-01-01T00:00:00.000001"));
            ps.setObject(5, java.time.LocalTime.parse("00:00:00.000001"));
            out.put("insert", ps.executeUpdate());
        }
        try (PreparedStatement ps = c.prepareStatement("SELECT * FROM " + t + " WHERE id = ?")) {
            ps.setInt(1, 2);
            try (ResultSet rs = ps.executeQuery()) {
                out.put("stored", resultSet(rs));
            }
        }
        // Parameters prepared at the backend keep the driver's types: a
        // TINY, a SHORT and an INT beside a FLOAT (which has the statement
        // prepared there) are columns of those types; a DATE argument of a
        // CALL is a DATE in the procedure's VARCHAR.
        try (PreparedStatement ps = c.prepareStatement("SELECT ? AS b, ? AS s, ? AS i, ? AS f")) {
            ps.setByte(1, (byte) -1);
            ps.setShort(2, (short) 300);
            ps.setInt(3, 7);
            ps.setFloat(4, 0.5f);
            try (ResultSet rs = ps.executeQuery()) {
                out.put("integer_widths", resultSet(rs));
            }
        }
        // Result columns made of parameters: typed, sized and nullable as
        // the server types a parameter, not the literal it would become
        // (CAST(? AS SIGNED) of an INT: a nullable BIGINT of precision 11).
        try (PreparedStatement ps = c.prepareStatement(
                "SELECT CAST(? AS SIGNED) AS c, ? + 1 AS s, ? AS i, CONCAT(?, 'x') AS t")) {
            for (int i = 1; i <= 4; i++) {
                ps.setInt(i, 5);
            }
            try (ResultSet rs = ps.executeQuery()) {
                out.put("columns_of_parameters", resultSet(rs));
            }
        }
        String p = prefix + "_date_text";
        exec(c, "DROP PROCEDURE IF EXISTS " + p,
                "CREATE PROCEDURE " + p + "(IN v VARCHAR(40)) SELECT v, LENGTH(v) AS n");
        try (PreparedStatement ps = c.prepareStatement("CALL " + p + "(?)")) {
            ps.setDate(1, java.sql.Date.valueOf("2024-01-02"));
            ps.execute();
            try (ResultSet rs = ps.getResultSet()) {
                out.put("date_argument", resultSet(rs));
            }
        }
        return out;
    }

    static Object multiStatement() throws SQLException {
        try (Connection c = connect("allowMultiQueries=true")) {
            String t = prefix + "_multi";
            exec(c, "DROP TABLE IF EXISTS " + t + "; CREATE TABLE " + t + " (id INT AUTO_INCREMENT PRIMARY KEY, v INT)");
            return query(c, "INSERT INTO " + t + " (v) VALUES (1), (2); UPDATE " + t + " SET v = v + 10;"
                    + " SELECT 'two' AS two, 2.5 AS half; SELECT id, v FROM " + t + " ORDER BY id");
        }
    }

    static Object largeResult(Connection c) throws Exception {
        int n = Integer.parseInt(env.get("MQ_BIG_ROWS"));
        String t = prefix + "_big";
        String digits = "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4"
                + " UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)";
        exec(c, "DROP TABLE IF EXISTS " + t, "CREATE TABLE " + t + " (id INT PRIMARY KEY, v VARCHAR(1000))",
                "INSERT INTO " + t + " SELECT n, REPEAT(CHAR(65 + n % 26), 1000) FROM (SELECT 1 + a.d + 10 * b.d + 100 * c.d"
                        + " + 1000 * e.d + 10000 * f.d + 100000 * g.d AS n FROM " + digits + " a, " + digits + " b, "
                        + digits + " c, " + digits + " e, " + digits + " f, " + digits + " g) x WHERE n <= " + n);
        Map<String, Object> out = new LinkedHashMap<>();
        try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SELECT id, v FROM " + t + " ORDER BY id")) {
            out.put("text", digest(rs));
        }
        try (PreparedStatement ps = c.prepareStatement("SELECT id, v FROM " + t + " WHERE id > ? ORDER BY id")) {
            ps.setInt(1, 0);
            try (ResultSet rs = ps.executeQuery()) {
                out.put("prepared", digest(rs));
            }
        }
        return out;
    }

    static Object digest(ResultSet rs) throws Exception {
        MessageDigest h = MessageDigest.getInstance("SHA-256");
        int rows = 0;
        while (rs.next()) {
            h.update((rs.getLong(1) + ":").getBytes(StandardCharsets.UTF_8));
            h.update(rs.getString(2).getBytes(StandardCharsets.UTF_8));
            rows++;
        }
        return map("rows", rows, "sha256", hex(h.digest()));
    }

    static Object lastInsertId(Connection c) throws SQLException {
        String t = prefix + "_autoinc";
        exec(c, "DROP TABLE IF EXISTS " + t, "CREATE TABLE " + t + " (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT) AUTO_INCREMENT = 1000");
        Map<String, Object> out = new LinkedHashMap<>();
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + t + " (v) VALUES (?), (?)", Statement.RETURN_GENERATED_KEYS)) {
            ps.setInt(1, 1);
            ps.setInt(2, 2);
            out.put("affected", ps.executeUpdate());
            List<Object> keys = new ArrayList<>();
            try (ResultSet rs = ps.getGeneratedKeys()) {
                while (rs.next()) keys.add(rs.getLong(1));
            }
            out.put("generated_keys", keys);
        }
        try (Statement st = c.createStatement()) {
            st.executeUpdate("INSERT INTO " + t + " (v) VALUES (3)", Statement.RETURN_GENERATED_KEYS);
            try (ResultSet rs = st.getGeneratedKeys()) {
                rs.next();
                out.put("text_generated_key", rs.getLong(1));
            }
            try (ResultSet rs = st.executeQuery("SELECT LAST_INSERT_ID()")) {
                rs.next();
                out.put("select_last_insert_id", rs.getLong(1));
            }
        }
        return out;
    }

    static Object switchDatabase(Connection c) throws SQLException {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("start", c.getCatalog());
        c.setCatalog(env.get("MQ_OTHER_DATABASE"));
        out.put("after_setCatalog_other", List.of(Objects.toString(c.getCatalog()), currentDb(c)));
        exec(c, "USE " + env.get("MQ_DATABASE"));
        out.put("after_use_back", currentDb(c));
        out.put("unknown_database", expectError(() -> c.setCatalog(prefix + "_no_such_database")));
        out.put("after_failed", currentDb(c));
        // A USE the driver learns of only from session-state tracking,
        // then setCatalog back: a driver that missed the move skips it.
        exec(c, "USE " + env.get("MQ_OTHER_DATABASE"));
        out.put("after_use_other", List.of(Objects.toString(c.getCatalog()), currentDb(c)));
        c.setCatalog(env.get("MQ_DATABASE"));
        out.put("after_setCatalog_back", List.of(Objects.toString(c.getCatalog()), currentDb(c)));
        return out;
    }

    static String currentDb(Connection c) throws SQLException {
        try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SELECT DATABASE()")) {
            rs.next();
            return rs.getString(1);
        }
    }

    // JDBC has no pool of its own; each driver's reset + ping is what a
    // pool (HikariCP, the driver's own) calls between borrowers.
    static Object poolResetPing() throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        try (Connection c = connect("")) {
            exec(c, "SET @mq_pool_var = 42");
            out.put("isValid", c.isValid(5)); // COM_PING
            // Connector/J's resetServerState() and MariaDB Connector/J's
            // reset() send COM_RESET_CONNECTION (by reflection: only one
            // driver is on the classpath).
            String[] how = driver.equals("mysql")
                    ? new String[] {"com.mysql.cj.jdbc.JdbcConnection", "resetServerState"}
                    : new String[] {"org.mariadb.jdbc.Connection", "reset"};
            Object inner = c.unwrap(Class.forName(how[0]));
            inner.getClass().getMethod(how[1]).invoke(inner);
            try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SELECT @mq_pool_var, DATABASE()")) {
                rs.next();
                out.put("session_variable_after_reset", value(rs.getObject(1)));
                out.put("database_after_reset", rs.getString(2));
            }
            out.put("isValid_after_reset", c.isValid(5));
        }
        return out;
    }

    // Connector/J's cursor: useCursorFetch=true with a fetch size on a
    // forward-only statement executes with CURSOR_TYPE_READ_ONLY and reads
    // the rows with COM_STMT_FETCH, fetchSize at a time.
    static Object cursor() throws Exception {
        if (!driver.equals("mysql")) throw new Skip("MariaDB Connector/J has no server-side cursors (COM_STMT_FETCH); fetchSize streams instead");
        String t = prefix + "_cursor";
        try (Connection c = connect("useCursorFetch=true&defaultFetchSize=0")) {
            exec(c, "DROP TABLE IF EXISTS " + t, "CREATE TABLE " + t + " (id INT PRIMARY KEY, v VARCHAR(20), d DOUBLE)");
            try (PreparedStatement ins = c.prepareStatement("INSERT INTO " + t + " VALUES (?, ?, ?)")) {
                for (int i = 1; i <= 1000; i++) {
                    ins.setInt(1, i);
                    ins.setString(2, "row " + i);
                    ins.setDouble(3, i / 4.0);
                    ins.addBatch();
                }
                ins.executeBatch();
            }
            Map<String, Object> out = new LinkedHashMap<>();
            for (int fetchSize : new int[] {7, 100, 1000}) {
                try (PreparedStatement ps = c.prepareStatement("SELECT id, v, d FROM " + t + " WHERE id > ? ORDER BY id",
                        ResultSet.TYPE_FORWARD_ONLY, ResultSet.CONCUR_READ_ONLY)) {
                    ps.setFetchSize(fetchSize);
                    ps.setInt(1, 0);
                    MessageDigest h = MessageDigest.getInstance("SHA-256");
                    int rows = 0;
                    try (ResultSet rs = ps.executeQuery()) {
                        while (rs.next()) {
                            h.update((rs.getInt(1) + ":" + rs.getString(2) + ":" + rs.getDouble(3) + ";").getBytes(StandardCharsets.UTF_8));
                            rows++;
                            // Another statement while the cursor is open.
                            if (rows == 500) out.put("fetch_" + fetchSize + "_interleaved", count(c, t));
                        }
                    }
                    out.put("fetch_" + fetchSize, map("rows", rows, "sha256", hex(h.digest())));
                }
            }
            // A cursor closed early, then the statement reused; an empty one.
            try (PreparedStatement ps = c.prepareStatement("SELECT id FROM " + t + " WHERE id > ? ORDER BY id")) {
                ps.setFetchSize(10);
                List<Object> firsts = new ArrayList<>();
                for (int from : new int[] {0, 990, 5000}) {
                    ps.setInt(1, from);
                    try (ResultSet rs = ps.executeQuery()) {
                        List<Integer> got = new ArrayList<>();
                        while (got.size() < 3 && rs.next()) got.add(rs.getInt(1));
                        firsts.add(got);
                    }
                }
                out.put("reexecuted", firsts);
            }
            return out;
        }
    }

    static Object tls() throws Exception {
        if (!"1".equals(env.get("MQ_TLS"))) throw new Skip("MQ_TLS=0");
        String ca = env.get("MQ_TLS_CA");
        String base = url("").replace("&sslMode=DISABLED", "");
        // Both drivers refuse to go on without a TLS session verified
        // against the CA: a connection is the client's proof of TLS.
        String extra = driver.equals("mysql")
                ? "sslMode=VERIFY_CA&trustCertificateKeyStoreUrl=file:" + Matrix.caStore(ca) + "&trustCertificateKeyStorePassword=changeit&trustCertificateKeyStoreType=PKCS12"
                : "sslMode=verify-ca&serverSslCert=" + ca;
        try (Connection c = DriverManager.getConnection(base + "&" + extra, env.get("MQ_USER"), env.get("MQ_PASSWORD"));
             PreparedStatement ps = c.prepareStatement("SELECT ?, 'over tls'")) {
            ps.setInt(1, 1);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return map("verified_tls_connection", true, "select", List.of(rs.getInt(1), rs.getString(2)));
            }
        }
    }

    /** A PKCS12 trust store holding the CA (Connector/J wants a key store). */
    static String caStore(String pem) throws Exception {
        java.security.cert.CertificateFactory cf = java.security.cert.CertificateFactory.getInstance("X.509");
        java.security.KeyStore ks = java.security.KeyStore.getInstance("PKCS12");
        ks.load(null, null);
        try (java.io.InputStream in = new java.io.FileInputStream(pem)) {
            int i = 0;
            for (java.security.cert.Certificate cert : cf.generateCertificates(in)) ks.setCertificateEntry("ca" + i++, cert);
        }
        java.io.File f = java.io.File.createTempFile("matrix-ca", ".p12");
        f.deleteOnExit();
        try (java.io.OutputStream out = new java.io.FileOutputStream(f)) {
            ks.store(out, "changeit".toCharArray());
        }
        return f.getAbsolutePath();
    }

    /** Minimal JSON writer (no dependency to fetch for it). */
    static final class Json {
        static String write(Object v) {
            StringBuilder s = new StringBuilder();
            write(s, v);
            return s.toString();
        }

        static void write(StringBuilder s, Object v) {
            if (v == null) {
                s.append("null");
            } else if (v instanceof Map) {
                s.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                    if (!first) s.append(',');
                    first = false;
                    string(s, String.valueOf(e.getKey()));
                    s.append(':');
                    write(s, e.getValue());
                }
                s.append('}');
            } else if (v instanceof List) {
                s.append('[');
                boolean first = true;
                for (Object x : (List<?>) v) {
                    if (!first) s.append(',');
                    first = false;
                    write(s, x);
                }
                s.append(']');
            } else if (v instanceof Boolean || v instanceof Integer || v instanceof Long) {
                s.append(v);
            } else {
                string(s, v.toString());
            }
        }

        static void string(StringBuilder s, String x) {
            s.append('"');
            for (int i = 0; i < x.length(); i++) {
                char ch = x.charAt(i);
                switch (ch) {
                    case '"' -> s.append("\\\"");
                    case '\\' -> s.append("\\\\");
                    case '\n' -> s.append("\\n");
                    case '\r' -> s.append("\\r");
                    case '\t' -> s.append("\\t");
                    default -> {
                        if (ch < 0x20) s.append(String.format("\\u%04x", (int) ch));
                        else s.append(ch);
                    }
                }
            }
            s.append('"');
        }
    }
}
