// Runs one Debezium connector in Debezium's embedded engine and lands every change event as a
// Kafka Connect S3 sink would: topics/<topic>/partition=0/<topic>+0+<first offset>.json, one
// file per topic per engine batch, written under a temporary name and renamed whole.
//
// Two landing shapes (args[2]):
//   kafka  one line per record, {"topic","partition","offset","timestamp","key","value"}, key and
//          value as Kafka Connect's JsonConverter writes them (with schemas); tombstones kept.
//   value  the value alone per line, as the S3 sink's JSON format writes it; tombstones dropped
//          (the sink's behavior.on.null.values=ignore).
//
// Offsets count every record of a topic, as Kafka's do; a restarted lander continues them.
//
// After each file is in place it prints "landed <topic> <offset>" for each of its records, so a
// test knows when the changes it made have all landed (it waits for its marker row's event).
//
// Usage: java -cp <debezium jars>:<dir> Lander <connector.properties> <landing dir> <kafka|value>

import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.format.Json;

import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

public final class Lander {
    private final Path landing;
    private final boolean kafkaEnvelope;
    private final Map<String, Long> nextOffset = new HashMap<>();
    private final PrintStream out;

    private Lander(Path landing, boolean kafkaEnvelope, PrintStream out) {
        this.landing = landing;
        this.kafkaEnvelope = kafkaEnvelope;
        this.out = out;
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        Lander lander = new Lander(Paths.get(args[1]), "kafka".equals(args[2]), System.out);
        lander.recoverOffsets();
        CountDownLatch done = new CountDownLatch(1);
        DebeziumEngine<ChangeEvent<String, String>> engine = DebeziumEngine.create(Json.class)
                .using(props)
                .notifying((records, committer) -> {
                    lander.land(records);
                    for (ChangeEvent<String, String> r : records) {
                        committer.markProcessed(r);
                    }
                    committer.markBatchFinished();
                })
                .using((success, message, error) -> {
                    System.err.println("engine stopped: success=" + success + " " + message);
                    if (error != null) {
                        error.printStackTrace();
                    }
                    done.countDown();
                })
                .build();
        ExecutorService executor = Executors.newSingleThreadExecutor();
        executor.execute(engine);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                engine.close();
            } catch (IOException e) {
                e.printStackTrace();
            }
        }));
        System.out.println("started");
        System.out.flush();
        done.await();
        executor.shutdown();
        System.exit(1);
    }

    // A restarted lander continues each topic's offsets after the files already landed.
    private void recoverOffsets() throws IOException {
        Path topics = landing.resolve("topics");
        if (!Files.isDirectory(topics)) {
            return;
        }
        try (var files = Files.walk(topics)) {
            for (Path file : (Iterable<Path>) files::iterator) {
                String name = file.getFileName().toString();
                if (!name.endsWith(".json")) {
                    continue;
                }
                String stem = name.substring(0, name.length() - ".json".length());
                int plus = stem.lastIndexOf('+');
                String topic = stem.substring(0, stem.lastIndexOf('+', plus - 1));
                long first = Long.parseLong(stem.substring(plus + 1));
                long count = Files.readAllLines(file, StandardCharsets.UTF_8).size();
                nextOffset.merge(topic, first + count, Math::max);
            }
        }
    }

    private synchronized void land(List<ChangeEvent<String, String>> records) {
        Map<String, List<ChangeEvent<String, String>>> byTopic = new LinkedHashMap<>();
        for (ChangeEvent<String, String> r : records) {
            byTopic.computeIfAbsent(r.destination(), t -> new ArrayList<>()).add(r);
        }
        try {
            for (Map.Entry<String, List<ChangeEvent<String, String>>> e : byTopic.entrySet()) {
                landTopic(e.getKey(), e.getValue());
            }
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
        out.flush();
    }

    private void landTopic(String topic, List<ChangeEvent<String, String>> records)
            throws IOException {
        long first = nextOffset.getOrDefault(topic, 0L);
        long offset = first;
        long now = System.currentTimeMillis();
        StringBuilder text = new StringBuilder();
        List<Long> landed = new ArrayList<>();
        for (ChangeEvent<String, String> r : records) {
            if (kafkaEnvelope) {
                text.append("{\"topic\":").append(quote(topic))
                        .append(",\"partition\":0,\"offset\":").append(offset)
                        .append(",\"timestamp\":").append(now)
                        .append(",\"key\":").append(r.key() == null ? "null" : r.key())
                        .append(",\"value\":").append(r.value() == null ? "null" : r.value())
                        .append("}\n");
            } else if (r.value() != null) {
                text.append(r.value()).append('\n');
            } else {
                continue;
            }
            landed.add(offset);
            offset++;
        }
        if (landed.isEmpty()) {
            return;
        }
        Path dir = landing.resolve("topics").resolve(topic).resolve("partition=0");
        Files.createDirectories(dir);
        // Zero-padded as the S3 sink pads them, so that names sort in offset order.
        String name = String.format("%s+0+%010d.json", topic, first);
        Path temp = landing.resolveSibling(landing.getFileName() + ".incoming").resolve(name);
        Files.createDirectories(temp.getParent());
        Files.write(temp, text.toString().getBytes(StandardCharsets.UTF_8));
        Files.move(temp, dir.resolve(name), StandardCopyOption.ATOMIC_MOVE);
        nextOffset.put(topic, offset);
        for (long o : landed) {
            out.println("landed " + topic + " " + o);
        }
    }

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\');
            }
            b.append(c);
        }
        return b.append('"').toString();
    }
}
