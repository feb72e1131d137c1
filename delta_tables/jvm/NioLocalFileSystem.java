package io.sparkraft.hadoop;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.local.LocalConfigKeys;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system with a file's mode set and its symbolic link read by the JDK (java.nio)
 * rather than by running the chmod and readlink programs: without Hadoop's native library, Hadoop
 * starts a process for each, about sixteen for each micro-batch of a streaming query's checkpoint
 * (delta_tables/local_fs.py). Everything else is Hadoop's own.
 */
public class NioLocalFileSystem extends LocalFileSystem {
    public NioLocalFileSystem() {
        super(new Raw());
    }

    /** The raw (checksum-less) file system: Hadoop's, but for setPermission. */
    public static class Raw extends RawLocalFileSystem {
        @Override
        public void setPermission(Path p, FsPermission permission) throws IOException {
            Files.setPosixFilePermissions(pathToFile(p).toPath(), posix(permission.toShort()));
        }

        /** Hadoop's answer, but a path that is no symbolic link (Hadoop asks the readlink program,
         * several times for each checkpoint file) is told by the JDK: its status is then the file's own. */
        @Override
        public FileStatus getFileLinkStatus(Path f) throws IOException {
            if (Files.isSymbolicLink(pathToFile(f).toPath())) {
                return super.getFileLinkStatus(f);
            }
            return getFileStatus(f);
        }
    }

    /** The same for FileContext users (Spark's checkpoint manager): fs.AbstractFileSystem.file.impl. */
    public static class Fs extends ChecksumFs {
        public Fs(URI uri, Configuration conf) throws IOException, URISyntaxException {
            super(new RawFs(uri, conf));
        }

        public Fs(Configuration conf) throws IOException, URISyntaxException {
            this(new URI("file:///"), conf);
        }
    }

    /** Hadoop's RawLocalFs over Raw (RawLocalFs's own constructors are not public). */
    public static class RawFs extends DelegateToFileSystem {
        public RawFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
            super(uri, new Raw(), conf, "file", false);
        }

        @Override
        public int getUriDefaultPort() {
            return -1;
        }

        @Override
        @Deprecated
        public FsServerDefaults getServerDefaults() throws IOException {
            return LocalConfigKeys.getServerDefaults();
        }

        @Override
        public FsServerDefaults getServerDefaults(Path f) throws IOException {
            return LocalConfigKeys.getServerDefaults();
        }

        @Override
        public boolean isValidName(String src) {
            return true;  // any local name, as Hadoop's RawLocalFs
        }
    }

    static Set<PosixFilePermission> posix(short mode) {
        PosixFilePermission[] bits = {  // from 0400 down to 0001
            PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_EXECUTE,
            PosixFilePermission.GROUP_READ, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_EXECUTE,
            PosixFilePermission.OTHERS_READ, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_EXECUTE};
        Set<PosixFilePermission> out = EnumSet.noneOf(PosixFilePermission.class);
        for (int i = 0; i < bits.length; i++) {
            if ((mode & (0400 >> i)) != 0) {
                out.add(bits[i]);
            }
        }
        return out;
    }
}
