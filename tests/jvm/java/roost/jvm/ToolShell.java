package roost.jvm;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.locks.LockSupport;

import org.apache.kafka.common.utils.Exit;
import org.slf4j.LoggerFactory;

/**
 * One JVM that runs many Kafka tools and client scenarios for a test, so each costs a method call
 * instead of a JVM start (about two seconds each on a loaded two-core machine).
 *
 * Protocol, one request per line on stdin: tab-separated words, the first a tool's main class
 * (e.g. org.apache.kafka.tools.TopicCommand) or a scenario of {@link Clients} ("clients:NAME"),
 * the rest its arguments. The answer on stdout: everything the tool printed (stdout and stderr
 * interleaved), then one line "@@END <exit status>". Kafka's tools end through
 * org.apache.kafka.common.utils.Exit, often inside their own catch-all (TopicCommand catches
 * Throwable around its Exit.exit(0)), so an exception cannot carry the status out. Instead each
 * request runs on a thread of its own, and Exit, pointed here, hands the status to this loop and
 * parks that thread for good. The line "quit" (or the end of stdin) ends the shell.
 */
public final class ToolShell {
    /** The status of the request running now: set by Exit or by the request's thread ending. */
    private static volatile CompletableFuture<Integer> current;

    private static void exitCalled(int status) {
        current.complete(status);
        while (true) {  // this thread is done: it never returns into the tool's catch-all
            LockSupport.park();
        }
    }

    /** Where System.out and System.err write: the running request's buffer. Set once, because
     * Scala's Console (kafka.admin.ConfigCommand, AclCommand) keeps the System.out it first saw. */
    private static final class Switch extends OutputStream {
        volatile OutputStream target = OutputStream.nullOutputStream();

        @Override
        public void write(int b) throws IOException {
            target.write(b);
        }

        @Override
        public void write(byte[] bytes, int offset, int length) throws IOException {
            target.write(bytes, offset, length);
        }
    }

    public static void main(String[] ignored) throws Exception {
        Exit.setExitProcedure((status, message) -> exitCalled(status));
        Exit.setHaltProcedure((status, message) -> exitCalled(status));
        // Logging starts now, on the real stderr (the shell's log file), not in a tool's output.
        LoggerFactory.getLogger(ToolShell.class).info("tool shell starting");
        PrintStream realOut = System.out;
        Switch output = new Switch();
        PrintStream shared = new PrintStream(output, true, StandardCharsets.UTF_8);
        System.setOut(shared);
        System.setErr(shared);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        realOut.println("@@READY");
        realOut.flush();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            if (line.equals("quit")) {
                break;
            }
            String[] words = line.split("\t", -1);
            ByteArrayOutputStream captured = new ByteArrayOutputStream();
            output.target = captured;
            PrintStream capture = shared;
            CompletableFuture<Integer> done = new CompletableFuture<>();
            current = done;
            Thread worker = new Thread(() -> {
                try {
                    done.complete(run(words[0], Arrays.copyOfRange(words, 1, words.length)));
                } catch (Throwable error) {
                    error.printStackTrace(capture);
                    done.complete(99);
                }
            }, "tool-" + words[0]);
            worker.setDaemon(true);
            worker.start();
            int status = done.get();
            shared.flush();
            output.target = OutputStream.nullOutputStream();
            String text = captured.toString(StandardCharsets.UTF_8);
            realOut.print(text);
            if (!text.isEmpty() && !text.endsWith("\n")) {
                realOut.println();
            }
            realOut.println("@@END " + status);
            realOut.flush();
        }
        System.exit(0);  // whatever threads the tools left behind
    }

    static int run(String command, String[] args) throws Throwable {
        if (command.startsWith("clients:")) {
            return Clients.run(command.substring("clients:".length()), args);
        }
        Method main = Class.forName(command).getMethod("main", String[].class);
        try {
            main.invoke(null, (Object) args);
            return 0;
        } catch (InvocationTargetException wrapped) {
            throw wrapped.getCause();
        }
    }

    private ToolShell() {
    }
}
