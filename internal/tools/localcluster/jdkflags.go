package localcluster

// jdkModuleFlags open the JDK internals Cassandra 5.0 uses on JDK 17, as its
// conf/jvm17-server.options and jvm17-clients.options do. Both the nodes and
// nodetool need them.
var jdkModuleFlags = []string{
	"--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
	"--add-exports=java.base/java.lang.ref=ALL-UNNAMED",
	"--add-exports=java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
	"--add-exports=java.management/com.sun.jmx.remote.security=ALL-UNNAMED",
	"--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED",
	"--add-exports=java.rmi/sun.rmi.server=ALL-UNNAMED",
	"--add-exports=java.sql/java.sql=ALL-UNNAMED",
	"--add-exports=jdk.unsupported/sun.misc=ALL-UNNAMED",
	"--add-exports=jdk.attach/sun.tools.attach=ALL-UNNAMED",
	"--add-exports=jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
	"--add-opens=java.base/java.lang=ALL-UNNAMED",
	"--add-opens=java.base/java.lang.module=ALL-UNNAMED",
	"--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
	"--add-opens=java.base/java.io=ALL-UNNAMED",
	"--add-opens=java.base/java.nio=ALL-UNNAMED",
	"--add-opens=java.base/java.util=ALL-UNNAMED",
	"--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
	"--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
	"--add-opens=java.base/jdk.internal.loader=ALL-UNNAMED",
	"--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
	"--add-opens=java.base/jdk.internal.reflect=ALL-UNNAMED",
	"--add-opens=java.base/jdk.internal.math=ALL-UNNAMED",
	"--add-opens=java.base/jdk.internal.module=ALL-UNNAMED",
	"--add-opens=java.base/jdk.internal.util.jar=ALL-UNNAMED",
	"--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
	"--add-opens=jdk.management/com.sun.management.internal=ALL-UNNAMED",
	"--add-opens=jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
}
