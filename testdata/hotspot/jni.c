// The native half of Jni.java: Jni.callBack calls Jni.sleepy.
#include <jni.h>

JNIEXPORT void JNICALL Java_Jni_callBack(JNIEnv *env, jclass cls) {
	jmethodID m = (*env)->GetStaticMethodID(env, cls, "sleepy", "()V");
	if (m != NULL) {
		(*env)->CallStaticVoidMethod(env, cls, m); // CALLBACK
	}
}
